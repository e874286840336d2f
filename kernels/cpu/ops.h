// Element-wise and per-row CPU kernels of the transformer block. All operate
// on f32 rows; none allocate. Reference semantics are the plain loops of the
// NumPy model in tests/reference/numpy_model.py.
#ifndef BEACON_KERNELS_CPU_OPS_H_
#define BEACON_KERNELS_CPU_OPS_H_

#include <cstdint>

namespace beacon {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], for one row of n. out may be x.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

// gate[i] = silu(gate[i]) * up[i]   (SwiGLU), in place in gate.
void SiluMul(float* gate, const float* up, int64_t n);

// Rotary embedding of one head vector of dim d at `position`, in place.
// interleaved: pairs (2i, 2i+1); otherwise (i, i + d/2). The angle of pair i
// is position * inv_freq[i] (theta^(-2i/d) unscaled; a RopeTable of
// kernels/cpu/rope_scaling.h otherwise), and cos and sin are multiplied by
// `attention_factor` (YaRN's magnitude scaling; 1 for the other types).
void Rope(float* x, int d, int32_t position, const float* inv_freq, bool interleaved, float attention_factor = 1.0f);

// Rope in two halves, for callers that rotate many heads at one position
// (the forward pass: every head of every layer): cs[i] = cos, cs[d/2 + i] =
// sin of pair i's angle, times attention_factor; RopeRotate applies a table.
// Rope(x, ...) == RopeCosSin(...) then RopeRotate(x, ...), bit for bit.
void RopeCosSin(int d, int32_t position, const float* inv_freq, float attention_factor, float* cs);
void RopeRotate(float* x, int d, const float* cs, bool interleaved);

// Fills inv_freq[i] = theta^(-2i/d) for i < d/2 (MakeRopeTable without scaling).
void RopeInvFreq(float theta, int d, float* inv_freq);

// In-place softmax of n values; returns the max (for callers that need it).
float SoftmaxInPlace(float* x, int64_t n);

// SoftmaxInPlace with the attention kernels' exponential on AVX-512
// (AttentionExp: relative error < 2e-7; -inf and anything below -87.3 after
// the max is subtracted give exactly 0), 16 lanes at a time; std::exp
// without AVX-512. For scores that rank cache slots (the KV policies'
// scoring), where ~10^7 exponentials per eviction made scalar expf the
// larger part of the cost; not for sampling. n >= 1 with a finite max.
void SoftmaxInPlaceFast(float* x, int64_t n);

// Dot product of two f32 vectors of length n.
float Dot(const float* a, const float* b, int64_t n);

// y[i] += a * x[i].
void Axpy(float a, const float* x, float* y, int64_t n);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_OPS_H_
