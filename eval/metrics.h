// The arithmetic of the fidelity metrics (docs/fidelity.md), free of any
// model or cache so that tests can check it on hand-computed cases.
//
// - KL(p || q) between the next-token distributions of the full-cache
//   reference (p) and a compressed replay (q), from their logits.
// - Attention-mass recall: the share of the reference's attention
//   probability that falls on the positions a compressed cache still holds.
#ifndef BEACON_EVAL_METRICS_H_
#define BEACON_EVAL_METRICS_H_

#include <cstdint>
#include <span>
#include <vector>

namespace beacon::eval {

// log(sum_i exp(x_i)), in double, shifted by the maximum so that no term
// overflows. REQUIRES !x.empty().
double LogSumExp(std::span<const float> x);

// KL(softmax(p_logits) || softmax(q_logits)) in nats, computed in double as
// sum_i p_i (p_logits_i - q_logits_i) - lse(p) + lse(q), which needs one
// exp pass per distribution. Never negative (rounding is clamped to 0).
// REQUIRES p_logits.size() == q_logits.size() > 0.
double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits);

// The reference side of KlDivergence, computed once and shared by every
// replay of one step: p = softmax(logits) and lse(logits).
struct SoftmaxRef {
  std::vector<double> p;
  std::vector<float> x;  // the logits

  double lse = 0.0;
  void Set(std::span<const float> logits);
  // KL(p || softmax(q_logits)). REQUIRES q_logits.size() == p.size().
  double KlTo(std::span<const float> q_logits) const;
};

// Index of the largest value, ties to the lowest index (the engine's greedy
// sampler's rule). REQUIRES !x.empty().
int32_t ArgMax(std::span<const float> x);

// Sum of probs[positions[i]] over i: the attention mass a query head puts on
// the given positions, where `probs` is indexed by token position. Positions
// outside [0, probs.size()) contribute nothing.
double MassOnPositions(std::span<const float> probs, std::span<const int32_t> positions);

// A running mean that also counts its samples.
class Mean {
 public:
  void Add(double x) {
    sum_ += x;
    ++n_;
  }
  void Merge(const Mean& o) {
    sum_ += o.sum_;
    n_ += o.n_;
  }
  int64_t count() const { return n_; }
  // 0 when empty.
  double value() const { return n_ > 0 ? sum_ / static_cast<double>(n_) : 0.0; }

 private:
  double sum_ = 0.0;
  int64_t n_ = 0;
};

// Greedy agreement length: with `agree[t]` non-zero when a sequence's
// greedy choice at step t equals the reference trace's token, the number of
// leading steps that agree (the length of the common prefix).
int32_t LeadingAgreement(std::span<const uint8_t> agree);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_METRICS_H_
