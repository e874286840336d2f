#include "eval/metrics.h"

#include <algorithm>
#include <cmath>

namespace beacon::eval {

double LogSumExp(std::span<const float> x) {
  const double m = *std::max_element(x.begin(), x.end());
  double s = 0.0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  return m + std::log(s);
}

double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  SoftmaxRef ref;
  ref.Set(p_logits);
  return ref.KlTo(q_logits);
}

void SoftmaxRef::Set(std::span<const float> logits) {
  lse = LogSumExp(logits);
  p.resize(logits.size());
  x.assign(logits.begin(), logits.end());
  for (size_t i = 0; i < logits.size(); ++i) p[i] = std::exp(static_cast<double>(logits[i]) - lse);
}

double SoftmaxRef::KlTo(std::span<const float> q_logits) const {
  // sum_i p_i (log p_i - log q_i) with log p_i = x_i - lse_p and
  // log q_i = y_i - lse_q; sum_i p_i = 1 folds the two constants out. Terms
  // with p_i = 0 (underflow) contribute 0, as the limit p log p does.
  // Summing p_i * (x_i - y_i) in double keeps the cancellation of nearly
  // equal logits exact to ~1e-12, far below the KLs of interest.
  double cross = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0.0) cross += p[i] * (static_cast<double>(x[i]) - q_logits[i]);
  }
  const double kl = cross - lse + LogSumExp(q_logits);
  return std::max(kl, 0.0);
}

int32_t ArgMax(std::span<const float> x) {
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

double MassOnPositions(std::span<const float> probs, std::span<const int32_t> positions) {
  double m = 0.0;
  const int64_t n = static_cast<int64_t>(probs.size());
  for (int32_t pos : positions) {
    if (pos >= 0 && pos < n) m += probs[pos];
  }
  return m;
}

int32_t LeadingAgreement(std::span<const uint8_t> agree) {
  int32_t n = 0;
  while (n < static_cast<int32_t>(agree.size()) && agree[n] != 0) ++n;
  return n;
}

}  // namespace beacon::eval
