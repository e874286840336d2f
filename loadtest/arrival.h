// Open-loop request arrivals: the gaps between consecutive requests.
//
// Gaps are gamma-distributed with shape k = `burstiness` and scale
// 1 / (rate * k), so the mean gap is always 1 / rate and the coefficient of
// variation is 1 / sqrt(k): k = 1 is a Poisson process (exponential gaps),
// k < 1 burstier than Poisson, k > 1 smoother (vLLM's --burstiness). A rate
// of +infinity sends every request at once (all gaps 0).
//
// Closed-loop load (a fixed concurrency) needs no arrival process: the runner
// starts a request whenever one finishes.
#ifndef BEACON_LOADTEST_ARRIVAL_H_
#define BEACON_LOADTEST_ARRIVAL_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"

namespace beacon::loadtest {

// OK when rate > 0 (or +inf) and burstiness > 0, both finite numbers (rate may
// be infinite); otherwise INVALID_ARGUMENT naming --rate or --burstiness.
absl::Status ValidateArrival(double rate, double burstiness);

class ArrivalProcess {
 public:
  // REQUIRES: ValidateArrival(rate, burstiness).ok(). The same seed gives the
  // same gaps.
  ArrivalProcess(double rate, double burstiness, uint64_t seed);

  // Seconds from the previous arrival to the next one.
  double NextGap();

  double rate() const { return rate_; }
  double burstiness() const { return burstiness_; }
  // The coefficient of variation (stddev / mean) of the gaps: 1/sqrt(k).
  static double GapCv(double burstiness);

 private:
  double rate_, burstiness_;
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_ARRIVAL_H_
