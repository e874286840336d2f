#include "kernels/cpu/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace beacon {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

double Llama3(double base, const RopeScaling& s) {
  const double wavelen = kTwoPi / base;
  const double old_context = s.original_context;
  if (wavelen < old_context / s.high_freq_factor) return base;
  if (wavelen > old_context / s.low_freq_factor) return base / s.factor;
  const double smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * base / s.factor + smooth * base;
}

// The (fractional) pair dimension at which a frequency completes `rotations`
// turns over the original context: the inverse of base(i) * L = 2 pi r.
double YarnCorrectionDim(double rotations, int d, double theta, int original_context) {
  return d * std::log(original_context / (rotations * kTwoPi)) / (2.0 * std::log(theta));
}

}  // namespace

std::string_view RopeScalingTypeName(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kYarn: return "yarn";
  }
  return "unknown";
}

float YarnDefaultAttentionFactor(float factor) {
  return factor <= 1.0f ? 1.0f : static_cast<float>(0.1 * std::log(static_cast<double>(factor)) + 1.0);
}

RopeTable MakeRopeTable(float theta, int head_dim, const RopeScaling& s, const float* freq_factors) {
  const int half = head_dim / 2;
  RopeTable t;
  t.inv_freq.resize(half);
  double lo = 0.0, hi = 0.0;
  if (s.type == RopeScalingType::kYarn) {
    lo = YarnCorrectionDim(s.beta_fast, head_dim, theta, s.original_context);
    hi = YarnCorrectionDim(s.beta_slow, head_dim, theta, s.original_context);
    if (s.truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(head_dim - 1));
    if (lo == hi) hi += 0.001;  // a step instead of a division by zero
    t.attention_factor = s.attention_factor > 0.0f ? s.attention_factor : YarnDefaultAttentionFactor(s.factor);
  }
  for (int i = 0; i < half; ++i) {
    double base = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (freq_factors != nullptr) base /= freq_factors[i];
    double f = base;
    switch (s.type) {
      case RopeScalingType::kNone: break;
      case RopeScalingType::kLinear: f = base / s.factor; break;
      case RopeScalingType::kLlama3: f = Llama3(base, s); break;
      case RopeScalingType::kYarn: {
        // ramp 0: pairs that turn often within the original context keep
        // their frequency (extrapolate); ramp 1: slow pairs are interpolated.
        const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
        f = base / s.factor * ramp + base * (1.0 - ramp);
        break;
      }
    }
    t.inv_freq[i] = static_cast<float>(f);
  }
  return t;
}

}  // namespace beacon
