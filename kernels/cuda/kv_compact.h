// CompactLayer (kv/store/compaction.h) on the GPU for every layer of one sequence:
// for every (layer, kv head) the K row, V row and position of slot
// keep[layer][h][i] move to slot i, so the kept tokens sit at the front in
// their original order. Slots >= n_keep are left as they are (the caller then
// truncates the sequence); nothing outside the sequence's slots [0, n_keep)
// of each (layer, head) is written. Bit-exact copies.
//
// Memory layout (device pointers):
//   kv          the paged cache (paged_kv.h): k, v bf16, pos int32
//   block_table the sequence's block table row
//   keep        [n_layers][n_kv_heads][n_keep] int32, each row strictly
//               ascending within [0, n_slots) (as LaunchSelectKeep writes
//               it), hence keep[i] >= i
//
// In place. A block owns one (layer, kv head) and moves its rows in
// ascending rounds: it reads every source row of a round into registers,
// synchronises, then writes them. A round's sources are >= its first
// destination, so they are read before this round writes them (read-all-
// then-write) and were not written by an earlier round (whose destinations
// are all lower); later rounds' sources lie above this round's destinations.
//
// Returns cudaErrorInvalidValue for null pointers (with work to do),
// n_keep < 0, n_keep > n_slots or an invalid kv.layout (head_dim odd or out
// of [2, 1024]); cudaSuccess without launching when n_keep == 0; otherwise
// the launch status. Asynchronous on `stream`, graph capturable.
#ifndef BEACON_KERNELS_CUDA_KV_COMPACT_H_
#define BEACON_KERNELS_CUDA_KV_COMPACT_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/paged_kv.h"

namespace beacon {

cudaError_t LaunchCompact(const PagedKv& kv, const int32_t* block_table, const int32_t* keep, int32_t n_keep,
                          int32_t n_slots, cudaStream_t stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_KV_COMPACT_H_
