// Intervals for a success rate over cases (docs/fidelity.md "Needle"):
// the percentile bootstrap the needle summary reports, and the Wilson score
// interval beside it, because a bootstrap of a cell whose cases all agree
// (every case 1, or every case 0) collapses to a single point however few
// the cases are, and Wilson's does not.
#ifndef BEACON_EVAL_BOOTSTRAP_H_
#define BEACON_EVAL_BOOTSTRAP_H_

#include <cstdint>
#include <span>

namespace beacon::eval {

struct Interval {
  double lo = 0.0;
  double hi = 0.0;
};

// The percentile bootstrap interval of the mean of `x`: `resamples` means
// of x.size() draws with replacement, and their (1 - level) / 2 and
// (1 + level) / 2 quantiles (linear interpolation between order
// statistics). Seeded (std::mt19937_64, whose output the standard fixes):
// the same inputs give the same interval everywhere. Paired differences
// (per case, a - b) give the interval of a difference of rates.
// REQUIRES !x.empty(), resamples >= 1, 0 < level < 1.
Interval BootstrapMeanInterval(std::span<const double> x, int resamples, uint64_t seed, double level = 0.95);

// The Wilson score interval of `successes` out of `n` at normal quantile z
// (1.96: 95%). REQUIRES 0 <= successes <= n, n >= 1.
Interval WilsonInterval(int64_t successes, int64_t n, double z = 1.959963984540054);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_BOOTSTRAP_H_
