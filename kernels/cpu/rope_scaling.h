// RoPE frequency scaling: the per-pair inverse frequencies and the magnitude
// ("attention") factor every RoPE in the engine rotates with, computed once
// per model. The CPU backend, the CUDA backend (uploaded) and the KV policies
// (rotating stored queries) all take the same RopeTable, so the three cannot
// drift apart.
//
// Formulas (the published ones, as HF transformers' modeling_rope_utils.py
// states them; base[i] = theta^(-2i/d) for pair i < d/2):
//   none    inv_freq[i] = base[i]
//   linear  inv_freq[i] = base[i] / factor                 (position interpolation)
//   llama3  wavelen = 2 pi / base[i]; with L = original_context:
//             wavelen < L / high_freq_factor: base[i]      (high frequencies kept)
//             wavelen > L / low_freq_factor:  base[i] / factor
//             otherwise s = (L / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor),
//                     (1 - s) * base[i] / factor + s * base[i]
//   yarn    dim(r) = d * ln(L / (2 pi r)) / (2 ln theta); lo = dim(beta_fast),
//           hi = dim(beta_slow), floored / ceiled when `truncate`, clamped to
//           [0, d - 1]; ramp(i) = clamp((i - lo) / (hi - lo), 0, 1) (hi += 0.001
//           when equal); inv_freq[i] = base[i] / factor * ramp(i) + base[i] * (1 - ramp(i)).
//           attention_factor = the configured one, else 0.1 ln(factor) + 1
//           (1 when factor <= 1). It multiplies cos and sin, so q and k are both
//           scaled by it and the attention logits by its square.
// Frequency factors (GGUF tensor rope_freqs.weight, what llama.cpp's converter
// writes for Llama 3.1 instead of the metadata) divide base[i] before any of
// the above: base[i] / freq_factors[i].
#ifndef BEACON_KERNELS_CPU_ROPE_SCALING_H_
#define BEACON_KERNELS_CPU_ROPE_SCALING_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace beacon {

enum class RopeScalingType : int32_t { kNone = 0, kLinear = 1, kLlama3 = 2, kYarn = 3 };

// "none", "linear", "llama3", "yarn".
std::string_view RopeScalingTypeName(RopeScalingType t);

// One model's RoPE scaling. Fields a type does not use are ignored by it.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;            // linear, llama3, yarn: context extension, >= 1
  float low_freq_factor = 1.0f;   // llama3
  float high_freq_factor = 4.0f;  // llama3; > low_freq_factor
  int original_context = 0;       // llama3, yarn: original_max_position_embeddings, > 0
  float attention_factor = 0.0f;  // yarn: > 0; 0 = the default 0.1 ln(factor) + 1
  float beta_fast = 32.0f;        // yarn: rotations that bound the extrapolated pairs
  float beta_slow = 1.0f;         // yarn: rotations that bound the interpolated pairs
  bool truncate = true;           // yarn: round the correction range to whole pairs
};

// What RoPE rotates with: angle(i, pos) = pos * inv_freq[i]; the rotated pair
// is attention_factor * (x0 cos - x1 sin, x0 sin + x1 cos).
struct RopeTable {
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_factor = 1.0f;
};

// The attention factor YaRN uses when the config gives none.
float YarnDefaultAttentionFactor(float factor);

// The table for `scaling` (see the formulas above), computed in double and
// rounded once to float. freq_factors: null, or [head_dim / 2] divisors.
// REQUIRES: head_dim even and > 0, theta > 1, the scaling's fields in range
// (ModelConfig::Validate checks them), freq_factors > 0.
RopeTable MakeRopeTable(float theta, int head_dim, const RopeScaling& scaling = {},
                        const float* freq_factors = nullptr);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_ROPE_SCALING_H_
