// SelectKeep (kv/policy/selection.h) on the GPU for every (layer, kv head) of one
// sequence at once: which n_keep slots survive an eviction, given the
// policy's scores.
//
// Memory layout (device pointers):
//   scores [n_layers][n_kv_heads][n_slots] f32
//   keep   [n_layers][n_kv_heads][n_keep] int32, written ascending
//   kv / block_table: the paged cache (paged_kv.h) and the sequence's block
//          table row; only kv.pos is read (positions of slots < n_slots)
//
// The rule, exactly SelectKeep's: slot s of (layer, h) is protected when
//   (keep_prompt && pos < prompt_len) || pos < sinks || s >= n_slots - window
// with pos = kv.pos of (layer, h, s). Every protected slot is kept; the rest
// of the n_keep are the unprotected slots with the highest scores, ties to
// the later slot (scores compare as floats: -0 equals +0). If n_keep or
// more slots are protected, the earliest n_keep protected slots are kept.
// NaN scores are not supported (SelectKeep's order is undefined for them).
//
// Method: one block per (layer, kv head). Each unprotected slot gets the key
// (order-preserving bits of its score) << 32 | slot, unique, so "highest
// key" is exactly SelectKeep's "better"; an 8-pass radix select finds the
// want-th highest key and the kept slots are written with a block scan.
// Cost: ~10 passes over the slots per (layer, kv head), a few microseconds
// per thousand slots.
//
// Launchers return cudaErrorInvalidValue for null pointers (with work to
// do), n_slots < 0, n_keep < 0 or > n_slots, an invalid kv.layout, or
// workspace_bytes < SelectKeepWorkspaceBytes; cudaSuccess without launching
// when n_keep == 0; otherwise the launch status. Asynchronous on `stream`,
// graph capturable.
#ifndef BEACON_KERNELS_CUDA_KV_SELECT_H_
#define BEACON_KERNELS_CUDA_KV_SELECT_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_kv.h"

namespace beacon {

// As kv/policy/selection.h's Protection.
struct DeviceProtection {
  int32_t prompt_len = 0;   // tokens at positions < prompt_len are the prompt
  int32_t sinks = 4;        // protect positions < sinks
  int32_t window = 32;      // protect the last `window` slots
  bool keep_prompt = true;  // protect the whole prompt
};

// Scratch: one uint32 per (layer, kv head, slot).
size_t SelectKeepWorkspaceBytes(int n_layers, int n_kv_heads, int32_t n_slots);

cudaError_t LaunchSelectKeep(const float* scores, const PagedKv& kv, const int32_t* block_table, int32_t n_slots,
                             const DeviceProtection& prot, int32_t n_keep, int32_t* keep, void* workspace,
                             size_t workspace_bytes, cudaStream_t stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_KV_SELECT_H_
