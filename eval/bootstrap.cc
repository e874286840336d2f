#include "eval/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace beacon::eval {
namespace {

// Quantile q of sorted `v` by linear interpolation between order
// statistics (Hyndman and Fan's type 7). REQUIRES !v.empty(), 0 <= q <= 1.
double Quantile(const std::vector<double>& v, double q) {
  const double h = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(h));
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (h - static_cast<double>(i)) * (v[i + 1] - v[i]);
}

}  // namespace

Interval BootstrapMeanInterval(std::span<const double> x, int resamples, uint64_t seed, double level) {
  std::mt19937_64 rng(seed);
  const uint64_t n = x.size();
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& m : means) {
    double sum = 0.0;
    // rng() % n: the modulo bias is below n / 2^64, far under any interval's precision.
    for (uint64_t i = 0; i < n; ++i) sum += x[rng() % n];
    m = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return Interval{Quantile(means, (1.0 - level) / 2.0), Quantile(means, (1.0 + level) / 2.0)};
}

Interval WilsonInterval(int64_t successes, int64_t n, double z) {
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(successes) / nn;
  const double z2 = z * z;
  const double center = (p + z2 / (2.0 * nn)) / (1.0 + z2 / nn);
  const double half = z / (1.0 + z2 / nn) * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
  // Clamped: rounding must not push an end past [0, 1].
  return Interval{std::max(0.0, center - half), std::min(1.0, center + half)};
}

}  // namespace beacon::eval
