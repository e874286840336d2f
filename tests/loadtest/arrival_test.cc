// Arrival processes: statistical properties with fixed seeds (deterministic,
// so these are exact-repeat tests with tolerances wide enough for any seed).
#include "loadtest/arrival.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace beacon::loadtest {
namespace {

struct Moments {
  double mean = 0, cv = 0;
};

Moments Measure(const std::vector<double>& gaps) {
  double sum = 0, sq = 0;
  for (double g : gaps) sum += g;
  const double mean = sum / gaps.size();
  for (double g : gaps) sq += (g - mean) * (g - mean);
  return {mean, std::sqrt(sq / (gaps.size() - 1)) / mean};
}

std::vector<double> Gaps(double rate, double burstiness, uint64_t seed, int n) {
  ArrivalProcess p(rate, burstiness, seed);
  std::vector<double> g(n);
  for (double& v : g) v = p.NextGap();
  return g;
}

TEST(ArrivalTest, PoissonHasTheRateAndExponentialGaps) {
  const double rate = 8.0;
  const std::vector<double> g = Gaps(rate, 1.0, 42, 50000);
  const Moments m = Measure(g);
  // Mean gap 1/rate: the standard error is mean/sqrt(n) = 0.45%; allow 2%.
  EXPECT_NEAR(m.mean * rate, 1.0, 0.02);
  EXPECT_NEAR(m.cv, 1.0, 0.03);  // exponential: CV 1
  // Memorylessness: P(gap > t) = exp(-rate t) at several t.
  for (double t : {0.05, 0.125, 0.25, 0.5}) {
    const double frac = std::count_if(g.begin(), g.end(), [&](double v) { return v > t; }) / double(g.size());
    EXPECT_NEAR(frac, std::exp(-rate * t), 0.01) << "t=" << t;
  }
  // Arrivals in one-second windows are Poisson(rate): variance equals the mean.
  std::vector<int> counts;
  double t = 0, window_end = 1;
  int in_window = 0;
  for (double gap : g) {
    t += gap;
    while (t >= window_end) {
      counts.push_back(in_window);
      in_window = 0;
      window_end += 1;
    }
    ++in_window;
  }
  double mean = 0, var = 0;
  for (int c : counts) mean += c;
  mean /= counts.size();
  for (int c : counts) var += (c - mean) * (c - mean);
  var /= counts.size() - 1;
  EXPECT_NEAR(mean, rate, 0.2);
  EXPECT_NEAR(var / mean, 1.0, 0.1);
}

TEST(ArrivalTest, GammaBurstinessSetsTheCoefficientOfVariation) {
  for (double k : {0.25, 0.5, 2.0, 4.0}) {
    const Moments m = Measure(Gaps(5.0, k, 7, 60000));
    EXPECT_NEAR(m.mean * 5.0, 1.0, 0.03) << "burstiness " << k;  // the rate does not move
    EXPECT_NEAR(m.cv, ArrivalProcess::GapCv(k), 0.05 * ArrivalProcess::GapCv(k)) << "burstiness " << k;
  }
  EXPECT_DOUBLE_EQ(ArrivalProcess::GapCv(4.0), 0.5);
  EXPECT_DOUBLE_EQ(ArrivalProcess::GapCv(1.0), 1.0);
}

TEST(ArrivalTest, SameSeedSameGapsAndInfiniteRateIsABurst) {
  EXPECT_EQ(Gaps(3.0, 1.0, 11, 100), Gaps(3.0, 1.0, 11, 100));
  EXPECT_NE(Gaps(3.0, 1.0, 11, 100), Gaps(3.0, 1.0, 12, 100));
  for (double g : Gaps(std::numeric_limits<double>::infinity(), 1.0, 1, 10)) EXPECT_EQ(g, 0.0);
}

TEST(ArrivalTest, ValidateNamesTheFlag) {
  EXPECT_TRUE(ValidateArrival(1.0, 1.0).ok());
  EXPECT_TRUE(ValidateArrival(std::numeric_limits<double>::infinity(), 0.5).ok());
  for (double r : {0.0, -1.0, std::nan("")}) {
    absl::Status s = ValidateArrival(r, 1.0);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("--rate"), absl::string_view::npos) << s;
  }
  for (double k : {0.0, -2.0, std::numeric_limits<double>::infinity()}) {
    absl::Status s = ValidateArrival(1.0, k);
    EXPECT_NE(s.message().find("--burstiness"), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace beacon::loadtest
