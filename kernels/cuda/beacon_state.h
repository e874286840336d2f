// BeaconKV on the GPU: one sequence's policy state in device memory, the
// kernel that feeds it every step (the device twin of BeaconPolicy's
// ObserveQuery under beacon_filter = kAll) and the kernel that scores a
// sequence's cached slots at an eviction (BeaconPolicy::Score), for every
// layer and KV head at once. The reference is kv/policy/beacon_policy.cc with
// kv/policy/fps.cc and kv/policy/attention_scoring.cc; selection and compaction follow in
// kv_select.h and kv_compact.h.
//
// State memory layout (one device allocation per sequence, carved by
// BeaconStateLayout, every region 256-byte aligned; the caller zeroes it
// with cudaMemset before the sequence's first observation):
//   ring      [n_layers][R][n_heads][head_dim] bf16  pre-RoPE queries of the
//                                                    last R tokens, ring order
//   ring_pos  [n_layers][R] int32                    their positions
//   fps_pts   [n_layers][n_heads][U][head_dim] bf16  continual FPS buffer:
//                                                    original vectors, arrival order
//   fps_inv   [n_layers][n_heads][U] f64             1 / |point|
//   fps_tag   [n_layers][n_heads][U] int32           token position of each point
//   fps_size  [n_layers][n_heads] int32              points held, in [0, U - 1]
// The queries are stored rounded to bf16 (round to nearest even, by
// Fp32ToBf16's integer steps: beacon_fps::StateBf16), half the bytes of
// f32 (issue 19, defect 5); everything downstream (norms, FPS, rotation,
// scoring) reads the rounded values widened exactly, which is what
// BeaconPolicy computes with KvPolicyOptions::beacon_bf16_state (the
// reference these kernels are tested against; the CUDA backend refuses
// beacon without it). docs/fidelity.md "bf16 policy state" measures what
// the rounding changes.
// Ring entry j < min(ring_count, R) is valid, where ring_count is the number
// of tokens the sequence has observed (the host counts them); FPS entries
// i < fps_size are valid. One more word is specified: fps_inv[l][h][U - 1]
// is nonzero exactly when buffer (l, h) has shrunk at least once (a point's
// 1 / |q| if it once held U points, else -1.0, written at its first shrink,
// which its phase may bring before U: beacon_fps_phase.h); the observe
// kernel reads it to know the buffer's next shrink size. Everything else is
// unspecified.
//
// Arithmetic. The FPS (admission norms, shrinks, beacon choice) is double
// precision with the operation order and fused multiply-adds of kv/policy/fps.cc as
// the project builds it (GCC contracts its dot products into FMAs under
// -march with FMA): on data without near-ties the device keeps exactly the
// points ContinualFps keeps, bit for bit, with the same inverse norms.
// Scoring reads the bf16 keys (see LaunchBeaconScore).
//
// Thread ownership: a state belongs to one sequence; kernels of one stream
// touch it in launch order. Launchers are asynchronous on `stream`, launch no
// allocation or synchronisation (CUDA-graph capturable), and return
// cudaErrorInvalidValue for invalid arguments (checked on the host before any
// CUDA call), cudaSuccess without launching when there is nothing to do, and
// otherwise the launch status (cudaGetLastError).
#ifndef BEACON_KERNELS_CUDA_BEACON_STATE_H_
#define BEACON_KERNELS_CUDA_BEACON_STATE_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/beacon_state_layout.h"
#include "kernels/cuda/paged_kv.h"
#include "kernels/cuda/rope.h"

namespace beacon {

// One sequence's part of a step's batch.
struct BeaconObserveEntry {
  void* state = nullptr;    // the sequence's state allocation
  int32_t first_token = 0;  // its rows of q_pre_rope / tok_pos: [first_token, first_token + n_tokens)
  int32_t n_tokens = 0;
  int32_t ring_count_before = 0;  // tokens it observed before this step: token i goes to
                                  // ring index (ring_count_before + i) % R
  int32_t fps_from_position = 0;  // tokens at positions below it enter the ring only, not
                                  // the FPS buffers (the prompt, when beacon_prompt_queries
                                  // is off; 0 = every token)
};

// After layer `layer`'s QKV projection (before RoPE), for every entry
// (`entries`: a device array of n_entries), every query head h and every one
// of its tokens in order: pushes the token's query q_pre_rope[t][h * d ..
// (h + 1) * d) into the ring of `layer` (ring_pos = tok_pos[t]) and Adds it
// to the FPS buffer of (layer, h), exactly as ContinualFps::Add: a query of
// zero or non-finite norm is refused (the ring still takes it), and so is a
// token whose tok_pos is below the entry's fps_from_position; the buffer
// appends, and when its size reaches U (the first time U - phase, the phase
// of buffer layer * n_heads + h: beacon_fps_phase.h) it shrinks to K by
// FarthestPointSample over the buffer, survivors in arrival order.
//   q_pre_rope [n_tokens_total][n_heads][head_dim] f32 (rows contiguous)
//   tok_pos    [n_tokens_total] int32
// max_tokens_per_entry bounds every entry's n_tokens (the launch is skipped
// when it or n_entries is 0). Entries must name distinct states.
// One block per (query head, entry), looping over the entry's tokens in
// order, so a long prefill chunk is one launch per layer.
cudaError_t LaunchBeaconObserve(const BeaconDims& dims, int layer, const BeaconObserveEntry* entries, int n_entries,
                                int max_tokens_per_entry, const float* q_pre_rope, const int32_t* tok_pos,
                                cudaStream_t stream);

// The same for layers [first_layer, first_layer + n_layers) in one launch
// (grid z = layer), layer first_layer + i reading its queries at
// q_pre_rope + i * q_layer_stride. Each (layer, head, entry) block touches
// only its layer's ring and buffers, so the state after the launch is the
// state after n_layers LaunchBeaconObserve calls, bit for bit. The CUDA
// backend uses it for decode steps: one launch after the last layer instead
// of one between each layer's QKV and attention, so the FPS shrinks (the
// slow blocks) of all layers overlap instead of each delaying its layer.
cudaError_t LaunchBeaconObserveLayers(const BeaconDims& dims, int first_layer, int n_layers,
                                      const BeaconObserveEntry* entries, int n_entries, int max_tokens_per_entry,
                                      const float* q_pre_rope, int64_t q_layer_stride, const int32_t* tok_pos,
                                      cudaStream_t stream);

// Group-shared state (KvPolicyOptions::beacon_group_queries): the state's
// heads are the KV heads (BeaconDims::n_heads = n_kv_heads, so scoring sees
// groups of one) and each holds its group's mean query. This gives the
// observe kernel its input:
//   out[t][s][c] = (q[t][s * group][c] + ... + q[t][s * group + group - 1][c]) / group
// summed in head order from 0 and divided in f32, rounded to nearest, as
// BeaconPolicy::ObserveQuery does, for t < n_tokens and s < n_heads / group.
//   q   [n_tokens][n_heads][head_dim] f32 (the model's query heads)
//   out [n_tokens][n_heads / group][head_dim] f32
// REQUIRES group >= 1 divides n_heads, head_dim >= 1, else cudaErrorInvalidValue.
cudaError_t LaunchBeaconGroupMeans(const float* q, int64_t n_tokens, int n_heads, int group, int head_dim, float* out,
                                   cudaStream_t stream);

// Bytes of the workspace LaunchBeaconScore needs (256-byte aligned regions).
size_t BeaconScoreWorkspaceBytes(const BeaconDims& dims, int32_t n_slots);

// Scores the slots [0, n_slots) of ONE sequence for every (layer, kv head),
// exactly BeaconPolicy::Score:
//   scores[l][g][s] = MaxPool1D_pool_kernel( max over query heads h of group
//       g and over h's scoring queries q of softmax_s(q . k_s / sqrt(d)) ),
// 0 where a group has no scoring query. The scoring queries of head h are
// the ring's valid entries (min(ring_count, R)) rotated at their own
// positions, then the beacons = FPS(buffer of (l, h), K) (the whole buffer
// while it holds <= K points) rotated at `position` (the next token's); the
// state is not modified. Keys are the paged cache's (bf16, after RoPE) of the
// sequence's block table row `block_table`. The softmax is causal: a ring
// query sees only the slots whose kv.pos is at most its own position (a
// query that sees none adds nothing), a beacon every slot.
// RoPE of the queries: inv_freq from rope.inv_freq when given (the model's
// scaled table), else float(theta^(-2i/d)) computed in double; angle
// position * inv_freq in double, cos/sin rounded to fp32 and multiplied by
// rope.attention_factor (QueryRotator's arithmetic). Logits are
// the fp32 queries' dot products with the bf16 keys, times 1/sqrt(d):
// kernel kMma (head_dim 64 and 128; others run kSimt) on tensor cores with
// each query split into two bf16 parts, within 2^-17 of sum |q_i k_i| of the
// fp32 dot product; kSimt in fp32 FMAs with the keys widened. Softmax in
// fp32 with the max subtracted.
//   scores    [n_layers][n_kv_heads][n_slots] f32
//   workspace BeaconScoreWorkspaceBytes(dims, n_slots) bytes
// REQUIRES kv.layout matches dims (n_layers, n_kv_heads, head_dim), kv.k
// and kv.pos set, else cudaErrorInvalidValue; pool_kernel odd >= 1;
// ring_count >= 0; rope.attention_factor > 0.
enum class BeaconScoreKernel { kSimt, kMma };
cudaError_t LaunchBeaconScore(const BeaconDims& dims, const void* state, int32_t ring_count, const PagedKv& kv,
                              const int32_t* block_table, int32_t n_slots, int32_t position, const RopeParams& rope,
                              int pool_kernel, float* scores, void* workspace, cudaStream_t stream,
                              BeaconScoreKernel kernel = BeaconScoreKernel::kMma);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_BEACON_STATE_H_
