// Internal to LaunchBeaconScore (beacon_score.cu): the attention part of
// BeaconPolicy::Score, i.e. AttentionScores(kMax) of every query head's
// scoring queries against its KV head's cached keys, maxed over the group.
//
// Inputs (workspace written by beacon_score.cu's queries kernel):
//   queries   [n_layers][n_heads][R + K][head_dim] f32, rotated; rows
//             [0, n_queries[l][h]) are valid
//   n_queries [n_layers][n_heads] int32
//   query_pos [n_layers][n_heads][R + K] int32: each query sees the slots
//             whose kv.pos is <= its entry (the causal mask; a ring query's
//             own position, a beacon's the current one)
// Scratch:
//   partials  [n_layers][n_heads][R + K][NumGroups(n_slots)] (max, sum exp)
//             of each query over each group of ChunksPerGroup(n_slots)
//             chunks of kChunkSlots slots (at most kMaxGroups groups, so the
//             scratch does not grow with the context)
//   stats     [n_layers][n_heads][R + K] (max, 1 / sum exp) over all slots
// Output:
//   out       [n_layers][n_kv_heads][n_slots] f32: max over the group's heads
//             and their queries of softmax_s(scale * q . k_s) over the slots
//             the query sees (0 for the others); 0 where the group has no
//             query (BeaconPolicy's starting value). A query that sees no
//             slot adds nothing, as on the CPU.
//
// Arithmetic: q . k from the bf16 keys, on CUDA cores (fp32 FMAs over
// head_dim in ascending order, keys widened) or, with tensor_cores and
// head_dim 64 or 128, on tensor cores with each query split into two bf16
// parts (beacon_logit_tiles.cuh: within 2^-17 of sum |q_i k_i| of the fp32
// sum); logit = dot * scale; softmax as SoftmaxInPlace (exp(x - max) times
// 1 / sum), the sum merged over chunks and groups with exp(partial max -
// max) factors (online softmax).
// The logits are computed twice (stats pass, probability pass) rather than
// stored: the [queries][slots] matrix of every head would dwarf the keys.
#ifndef BEACON_KERNELS_CUDA_BEACON_LOGITS_H_
#define BEACON_KERNELS_CUDA_BEACON_LOGITS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/beacon_state.h"
#include "kernels/cuda/paged_kv.h"

namespace beacon::beacon_logits {

// kChunkSlots, kMaxGroups, NumChunks, ChunksPerGroup and NumGroups live in
// beacon_state_layout.h (the workspace size is computed without CUDA).

struct Args {
  BeaconDims dims;
  PagedKv kv;
  const int32_t* block_table = nullptr;
  int32_t n_slots = 0;
  const float* queries = nullptr;
  const int32_t* n_queries = nullptr;
  const int32_t* query_pos = nullptr;
  float2* partials = nullptr;
  float2* stats = nullptr;
  float scale = 1.0f;
  float* out = nullptr;
  bool tensor_cores = false;  // MmaTile where head_dim is 64 or 128, else SimtTile
};

// The stats, combine and probability-max kernels. REQUIRES n_slots > 0 and
// arguments validated by LaunchBeaconScore.
cudaError_t LaunchProbMax(const Args& a, cudaStream_t stream);

}  // namespace beacon::beacon_logits

#endif  // BEACON_KERNELS_CUDA_BEACON_LOGITS_H_
