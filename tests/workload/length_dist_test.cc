// Length distributions: the syntax and sampling shared by beacon-loadtest
// and beacon-plan.
#include "workload/length_dist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace beacon::workload {
namespace {

std::vector<int32_t> Draw(const LengthDist& d, int n, uint64_t seed = 3) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = d.Sample(rng);
  return v;
}

void MeanStd(const std::vector<int32_t>& v, double* mean, double* std) {
  double s = 0, q = 0;
  for (int32_t x : v) s += x;
  *mean = s / v.size();
  for (int32_t x : v) q += (x - *mean) * (x - *mean);
  *std = std::sqrt(q / (v.size() - 1));
}

LengthDist Must(const char* spec) {
  absl::StatusOr<LengthDist> d = LengthDist::Parse(spec, "--prompt-len");
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

TEST(LengthDistTest, ParsesEveryForm) {
  for (const char* spec : {"fixed:128", "128", "uniform:64:256", "normal:512:128", "lognormal:512:256"}) {
    absl::StatusOr<LengthDist> d = LengthDist::Parse(spec, "--output-len");
    ASSERT_TRUE(d.ok()) << spec << ": " << d.status();
    // The canonical form parses back to the same distribution.
    absl::StatusOr<LengthDist> back = LengthDist::Parse(d->ToString(), "--output-len");
    ASSERT_TRUE(back.ok()) << d->ToString();
    EXPECT_EQ(back->ToString(), d->ToString());
    EXPECT_EQ(back->kind(), d->kind());
  }
  EXPECT_EQ(Must("uniform:64:256").kind(), LengthDist::Kind::kUniform);
  EXPECT_EQ(Must("128").ToString(), "fixed:128");
  EXPECT_EQ(LengthDist::Fixed(32768).ToString(), "fixed:32768");
  EXPECT_EQ(LengthDist::Fixed(0).Mean(), 1);
}

TEST(LengthDistTest, FixedAndBareInteger) {
  for (int32_t v : Draw(Must("fixed:37"), 100)) EXPECT_EQ(v, 37);
  for (int32_t v : Draw(Must("64"), 10)) EXPECT_EQ(v, 64);
  EXPECT_EQ(Must("fixed:37").ToString(), "fixed:37");
  EXPECT_EQ(Must("fixed:37").Mean(), 37);
}

TEST(LengthDistTest, UniformCoversItsInclusiveRangeEvenly) {
  const std::vector<int32_t> v = Draw(Must("uniform:10:13"), 40000);
  int counts[4] = {0, 0, 0, 0};
  for (int32_t x : v) {
    ASSERT_GE(x, 10);
    ASSERT_LE(x, 13);
    ++counts[x - 10];
  }
  for (int c : counts) EXPECT_NEAR(c / 40000.0, 0.25, 0.01);
  EXPECT_EQ(Must("uniform:5:5").ToString(), "uniform:5:5");
  EXPECT_EQ(Must("uniform:10:20").Mean(), 15);
}

TEST(LengthDistTest, NormalAndLognormalHaveTheGivenMeanAndStd) {
  double mean, std;
  MeanStd(Draw(Must("normal:500:50"), 50000), &mean, &std);
  EXPECT_NEAR(mean, 500, 2);
  EXPECT_NEAR(std, 50, 1.5);
  // MEAN and STD are those of the lengths, not of their logarithm.
  MeanStd(Draw(Must("lognormal:400:200"), 80000), &mean, &std);
  EXPECT_NEAR(mean, 400, 6);
  EXPECT_NEAR(std, 200, 10);
  // A lognormal is right-skewed: its median is below the mean.
  std::vector<int32_t> v = Draw(Must("lognormal:400:200"), 20001);
  std::nth_element(v.begin(), v.begin() + 10000, v.end());
  EXPECT_LT(v[10000], 380);
  // STD 0 is the fixed length.
  for (int32_t x : Draw(Must("normal:9:0"), 10)) EXPECT_EQ(x, 9);
}

TEST(LengthDistTest, SamplesAreClampedToAtLeastOne) {
  for (int32_t x : Draw(Must("normal:2:50"), 5000)) EXPECT_GE(x, 1);
}

TEST(LengthDistTest, SameSeedSameLengths) {
  EXPECT_EQ(Draw(Must("lognormal:100:80"), 50, 9), Draw(Must("lognormal:100:80"), 50, 9));
}

TEST(LengthDistTest, BadSpecsNameTheFlagAndTheProblem) {
  struct Case {
    const char* spec;
    const char* needle;
  };
  for (const Case& c :
       {Case{"poisson:3", "unknown distribution 'poisson'"}, Case{"fixed:0", ">= 1"}, Case{"fixed:2.5", "integer"},
        Case{"fixed", "one value"}, Case{"fixed:1:2", "one value"}, Case{"uniform:9:3", "A <= B"},
        Case{"uniform:3", "two values"}, Case{"normal:0:5", "MEAN must be > 0"},
        Case{"lognormal:10:-1", "STD must be >= 0"}, Case{"normal:ten:1", "'ten' is not a number"},
        Case{"", "unknown distribution"}, Case{"fixed:nan", "not a number"},
        Case{"zipf:2", "unknown distribution 'zipf'"}, Case{"uniform:1", "two values"},
        Case{"fixed:200000000", "too large"}, Case{"normal:100:1e9", "too large"}}) {
    absl::StatusOr<LengthDist> d = LengthDist::Parse(c.spec, "--output-len");
    ASSERT_FALSE(d.ok()) << c.spec;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(d.status().message().rfind("--output-len", 0), 0u) << d.status();
    EXPECT_NE(d.status().message().find(c.needle), absl::string_view::npos) << c.spec << ": " << d.status();
  }
}

TEST(LengthDistTest, LargeSamplesHaveTheStatedMomentsAndRange) {
  std::mt19937_64 rng(7);
  auto moments = [&](const char* spec, double* mean, double* sd, int32_t* lo, int32_t* hi) {
    LengthDist d = Must(spec);
    double s = 0, s2 = 0;
    *lo = INT32_MAX, *hi = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const int32_t v = d.Sample(rng);
      s += v, s2 += static_cast<double>(v) * v;
      *lo = std::min(*lo, v), *hi = std::max(*hi, v);
    }
    *mean = s / n;
    *sd = std::sqrt(s2 / n - *mean * *mean);
  };
  double mean, sd;
  int32_t lo, hi;
  moments("fixed:77", &mean, &sd, &lo, &hi);
  EXPECT_EQ(lo, 77);
  EXPECT_EQ(hi, 77);
  moments("uniform:10:20", &mean, &sd, &lo, &hi);
  EXPECT_EQ(lo, 10);
  EXPECT_EQ(hi, 20);
  EXPECT_NEAR(mean, 15, 0.1);
  moments("normal:1000:100", &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, 1000, 3);
  EXPECT_NEAR(sd, 100, 3);
  // Lognormal: MEAN and STD of the lengths themselves, as beacon-loadtest.
  moments("lognormal:4096:2048", &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, 4096, 4096 * 0.02);
  EXPECT_NEAR(sd, 2048, 2048 * 0.05);
  EXPECT_GE(lo, 1);
}

}  // namespace
}  // namespace beacon::workload
