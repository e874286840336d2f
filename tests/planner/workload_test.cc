// Length distributions (beacon-loadtest's syntax), arrivals and clamping.
#include "planner/workload.h"

#include <cmath>

#include "gtest/gtest.h"

namespace beacon::planner {
namespace {

TEST(LengthDist, ParsesEveryForm) {
  for (const char* spec : {"fixed:128", "128", "uniform:64:256", "normal:512:128", "lognormal:512:256"}) {
    EXPECT_TRUE(ParseLengthDist(spec, "--output-len").ok()) << spec;
  }
  absl::StatusOr<LengthDist> d = ParseLengthDist("uniform:64:256", "--prompt-len");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, LengthDist::Kind::kUniform);
  EXPECT_DOUBLE_EQ(d->Mean(), 160);
}

TEST(LengthDist, BadSpecsNameTheFlag) {
  for (const char* spec : {"fixed:0", "fixed:1.5", "uniform:9:3", "normal:-1:2", "lognormal:100:-1", "zipf:2",
                           "fixed", "uniform:1", "normal:a:b", ""}) {
    absl::StatusOr<LengthDist> d = ParseLengthDist(spec, "--output-len");
    ASSERT_FALSE(d.ok()) << spec;
    EXPECT_TRUE(absl::IsInvalidArgument(d.status()));
    EXPECT_EQ(d.status().message().rfind("--output-len", 0), 0u) << d.status();
  }
}

TEST(LengthDist, SamplesHaveTheStatedMoments) {
  std::mt19937_64 rng(7);
  auto moments = [&](const char* spec, double* mean, double* sd, int32_t* lo, int32_t* hi) {
    LengthDist d = *ParseLengthDist(spec, "x");
    double s = 0, s2 = 0;
    *lo = INT32_MAX, *hi = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const int32_t v = d.Sample(rng);
      s += v, s2 += double{v} * v;
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

WorkloadSpec Poisson(double rate) {
  WorkloadSpec w;
  w.arrival = ArrivalKind::kPoisson;
  w.rate = rate;
  w.num_requests = 5000;
  w.prompt = *ParseLengthDist("uniform:10:100", "p");
  w.output = *ParseLengthDist("lognormal:500:300", "o");
  return w;
}

TEST(Workload, PoissonArrivalsAtTheRateAndCommonRandomNumbers) {
  const std::vector<PlannedRequest> a = GenerateRequests(Poisson(2.0), 100000);
  const std::vector<PlannedRequest> b = GenerateRequests(Poisson(8.0), 100000);
  ASSERT_EQ(a.size(), 5000u);
  EXPECT_EQ(a[0].arrival_s, 0);
  // Mean gap 1 / rate.
  EXPECT_NEAR(a.back().arrival_s / (a.size() - 1), 0.5, 0.03);
  for (size_t i = 0; i < a.size(); ++i) {
    // The same requests, at times scaled by the rate ratio.
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
    EXPECT_NEAR(a[i].arrival_s, 4 * b[i].arrival_s, 1e-9 * (1 + a[i].arrival_s));
    if (i > 0) {
      EXPECT_GE(a[i].arrival_s, a[i - 1].arrival_s);
    }
  }
}

TEST(Workload, ClampsToTheContextAsTheServerDoes) {
  WorkloadSpec w;
  w.num_requests = 10;
  w.prompt = *ParseLengthDist("fixed:900", "p");
  w.output = *ParseLengthDist("fixed:500", "o");
  for (const PlannedRequest& r : GenerateRequests(w, 1000)) {
    EXPECT_EQ(r.prompt_tokens, 900);
    EXPECT_EQ(r.output_tokens, 500);
    EXPECT_EQ(r.max_new_tokens, 100);  // context - prompt
  }
  w.max_tokens = 50;  // outputs longer than max_tokens end by length
  for (const PlannedRequest& r : GenerateRequests(w, 100000)) EXPECT_EQ(r.max_new_tokens, 50);
  w.prompt = *ParseLengthDist("fixed:5000", "p");
  for (const PlannedRequest& r : GenerateRequests(w, 1000)) {
    EXPECT_EQ(r.prompt_tokens, 999);
    EXPECT_EQ(r.max_new_tokens, 1);
  }
}

TEST(Workload, ValidateNamesTheField) {
  WorkloadSpec w = Poisson(0);
  EXPECT_NE(w.Validate().message().find("rate"), std::string::npos);
  w = Poisson(1);
  w.num_requests = 0;
  EXPECT_NE(w.Validate().message().find("requests"), std::string::npos);
  w = WorkloadSpec();
  w.concurrency = 0;
  EXPECT_NE(w.Validate().message().find("concurrency"), std::string::npos);
}

}  // namespace
}  // namespace beacon::planner
