// The steady-state accounting of `beacon-bench policy` (policy_bench.h): per
// decode step, the seconds of the policy's own work (observation plus
// eviction) and the evictions made; summarised over every step and over the
// steady state, the steps after the first eviction's.
//
// Why a steady state: before its first eviction a compressing policy only
// observes, so an average over the whole run mixes a warm-up with the
// regime a long generation lives in. Why percentiles: a policy's work is
// bursty (an eviction every `interval` steps; BeaconKV's FPS shrinks), and
// a mean hides the step that pays a burst, which is the latency a client
// sees. Percentiles are nearest-rank (the smallest sample with at least p%
// of the samples at or below it), so each one is a measured step.
//
// Header-only: the bench and its unit test (tests/bench/) share it. Not
// thread-safe; the bench's driving thread owns it.
#ifndef BEACON_BENCH_POLICY_STEP_STATS_H_
#define BEACON_BENCH_POLICY_STEP_STATS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace beacon {

struct StepTimeSummary {
  int64_t steps = 0;  // samples summarised; every field below is 0 when none
  double mean_s = 0;
  double p50_s = 0;
  double p99_s = 0;
  double max_s = 0;
};

// Nearest-rank percentile of `samples` (any order), p in (0, 100]: the
// sample at rank ceil(p / 100 * n) in ascending order. 0 when empty.
inline double NearestRankPercentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  const double n = static_cast<double>(samples.size());
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * n - 1e-9));  // 1-based; the epsilon absorbs p * n rounding
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(samples.size()));
  std::nth_element(samples.begin(), samples.begin() + (rank - 1), samples.end());
  return samples[rank - 1];
}

inline StepTimeSummary SummariseSteps(const std::vector<double>& seconds) {
  StepTimeSummary s;
  s.steps = static_cast<int64_t>(seconds.size());
  if (seconds.empty()) return s;
  double sum = 0;
  for (double x : seconds) sum += x;
  s.mean_s = sum / static_cast<double>(seconds.size());
  s.p50_s = NearestRankPercentile(seconds, 50);
  s.p99_s = NearestRankPercentile(seconds, 99);
  s.max_s = *std::max_element(seconds.begin(), seconds.end());
  return s;
}

class PolicyStepStats {
 public:
  // One decode step: `policy_s` seconds of policy work, `evictions` made in
  // the step (0 or more).
  void AddStep(double policy_s, int64_t evictions) {
    if (first_eviction_step_ < 0 && evictions > 0) {
      first_eviction_step_ = static_cast<int64_t>(policy_s_.size());
    } else if (first_eviction_step_ >= 0) {
      steady_evictions_ += evictions;
    }
    policy_s_.push_back(policy_s);
    evicted_.push_back(evictions > 0);
  }

  int64_t steps() const { return static_cast<int64_t>(policy_s_.size()); }
  // Index of the step that made the first eviction; -1 when none did.
  int64_t first_eviction_step() const { return first_eviction_step_; }
  // The steady state: the steps after the first eviction's step (none when
  // no step evicted), and the evictions they made.
  int64_t steady_steps() const { return first_eviction_step_ < 0 ? 0 : steps() - first_eviction_step_ - 1; }
  int64_t steady_evictions() const { return steady_evictions_; }
  double steady_evictions_per_step() const {
    return steady_steps() == 0 ? 0 : static_cast<double>(steady_evictions_) / static_cast<double>(steady_steps());
  }

  StepTimeSummary All() const { return SummariseSteps(policy_s_); }
  StepTimeSummary Steady() const { return SteadySummary(/*with_evictions=*/true); }
  // The steady steps that made no eviction: the observation's own bursts
  // (BeaconKV's FPS shrinks), which the evictions would otherwise mask in
  // the p99 and max.
  StepTimeSummary SteadyWithoutEvictions() const { return SteadySummary(/*with_evictions=*/false); }

 private:
  StepTimeSummary SteadySummary(bool with_evictions) const {
    if (first_eviction_step_ < 0) return StepTimeSummary{};
    std::vector<double> steady;
    for (size_t i = first_eviction_step_ + 1; i < policy_s_.size(); ++i) {
      if (with_evictions || !evicted_[i]) steady.push_back(policy_s_[i]);
    }
    return SummariseSteps(steady);
  }

  std::vector<double> policy_s_;  // per step, in order
  std::vector<char> evicted_;     // per step: made an eviction
  int64_t first_eviction_step_ = -1;
  int64_t steady_evictions_ = 0;  // made after the first eviction's step
};

}  // namespace beacon

#endif  // BEACON_BENCH_POLICY_STEP_STATS_H_
