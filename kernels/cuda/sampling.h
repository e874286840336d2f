// Next-token sampling on the GPU: greedy argmax, and temperature sampling
// with top-k, top-p and min-p, one token per row of logits.
//
// Memory layout (device pointers, row-major, rows contiguous: the row stride
// equals `vocab`):
//   logits     [n_rows, vocab]  f32, penalties (if any) already applied by the
//                               host; not modified
//   params     [n_rows]         DeviceSamplingParams, one per row
//   out_tokens [n_rows]         int32 token ids in [0, vocab)
//
// Semantics follow engine/sampler.cc (Sampler::Sample without penalties),
// filter for filter and in its order:
//   - NaN logits are treated as -inf (never chosen while any logit is not
//     -inf/NaN); -0.0 and +0.0 are equal (a tie).
//   - temperature <= 0 (or NaN): greedy, argmax with ties to the lowest id.
//     An all -inf/NaN row gives token 0.
//   - Otherwise: top-k on the logits (0 < top_k < vocab; exactly top_k
//     candidates, ties to the lower id); weights w = 1 for logits equal to the
//     maximum, else expf((x - max) * (1 / temperature)) in fp32; top-p keeps
//     the shortest prefix of the candidates sorted by (w desc, id asc) whose
//     mass reaches top_p * total (at least one token; top_p >= 1 or NaN: off);
//     min-p keeps w >= min(min_p, 1) (min_p <= 0 or NaN: off); the token is
//     drawn with probability proportional to w among the survivors. A row of
//     only -inf/NaN is a uniform draw over the (top-k) candidates, as on CPU.
//
// Draw contract (exact, so tests and hosts can reproduce it): each weight is
// quantised to q = floor(w * 2^F), F = SamplingMassFractionBits(vocab), and
// with Q the sum of q over the surviving tokens and r =
// SamplingRandomBits(seed, step), u = floor(r * Q / 2^64); the token is the
// lowest id t among the survivors with sum_{s <= t} q_s > u (a prefix sum in
// token order, not in sorted order as on the CPU; the distribution is the
// same). Integer masses make the result bitwise deterministic: the same
// logits and (seed, step) give the same token on every run, at any row
// position and batch size; the row index is deliberately not mixed in, so a
// request's tokens do not depend on where the scheduler places it. Rows with
// different seeds draw independently. Tokens with 0 < w < 2^-F are never
// drawn (on the CPU their total probability is below vocab * 2^-F, < 1e-8 for
// vocab 152K), and top-p masses carry the same quantisation: the top-p cutoff
// matches the CPU's except when the cumulative mass lands within that margin
// of top_p * total.
//
// Arithmetic: radix selection over the row (no sort, no global scratch), a
// few passes per active filter; everything fits in shared memory.
//
// Launchers return cudaErrorInvalidValue for null logits/out_tokens/params,
// n_rows < 0 or > INT32_MAX, vocab <= 0 or > 2^30, or workspace_bytes below
// SamplingWorkspaceBytes; cudaSuccess without launching for n_rows == 0;
// otherwise the launch status (cudaGetLastError). Asynchronous on `stream`,
// no allocation, no host synchronisation: capturable in a CUDA graph.
// `out_tokens` must not overlap the inputs.
#ifndef BEACON_KERNELS_CUDA_SAMPLING_H_
#define BEACON_KERNELS_CUDA_SAMPLING_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

struct DeviceSamplingParams {  // one per row, in device memory
  float temperature = 0.0f;    // <= 0: greedy (argmax; ties -> lowest token id)
  int32_t top_k = 0;           // 0: off
  float top_p = 1.0f;          // 1: off
  float min_p = 0.0f;          // 0: off
  uint64_t seed = 0;
  uint64_t step = 0;  // draw counter (e.g. tokens generated so far), mixed with seed
};
static_assert(sizeof(DeviceSamplingParams) == 32, "host and device layouts must agree");

// splitmix64's finaliser: a bijection on 64 bits with full avalanche.
inline __host__ __device__ uint64_t SamplingMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 64 random bits of draw `step` of the stream `seed`. For a fixed seed,
// distinct steps give distinct bits (step * odd constant is a bijection, and so
// is the mix), so no step repeats another's draw.
inline __host__ __device__ uint64_t SamplingRandomBits(uint64_t seed, uint64_t step) {
  return SamplingMix64(SamplingMix64(seed) + step * 0xD1B54A32D192ED03ull);
}

// F of the draw contract: as many fraction bits as keep vocab * 2^F < 2^62,
// at most 52 (beyond that an fp32 weight has no more bits to give).
inline __host__ __device__ int SamplingMassFractionBits(int vocab) {
  int bits = 0;  // bit length of vocab
  for (uint32_t v = vocab > 0 ? static_cast<uint32_t>(vocab) : 1u; v != 0; v >>= 1) ++bits;
  const int f = 62 - bits;
  return f < 52 ? f : 52;
}

// Scratch LaunchSample needs. The current kernel keeps all of its scratch in
// shared memory, so this is 0 (and `workspace` may be null); callers should
// still size by it, as a split-row variant for very large vocabularies would
// claim some. 0 for n_rows <= 0 or vocab <= 0.
size_t SamplingWorkspaceBytes(int64_t n_rows, int vocab);

// logits: [n_rows][vocab] f32 (device). out_tokens: [n_rows] int32 (device).
cudaError_t LaunchSample(const float* logits, int64_t n_rows, int vocab, const DeviceSamplingParams* params,
                         int32_t* out_tokens, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Greedy only, no params/workspace: argmax per row, ties -> lowest id, NaN as
// -inf (the same result LaunchSample gives a row with temperature <= 0).
cudaError_t LaunchArgmax(const float* logits, int64_t n_rows, int vocab, int32_t* out_tokens, KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_SAMPLING_H_
