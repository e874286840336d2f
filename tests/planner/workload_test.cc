// Arrivals and clamping (length distributions: tests/workload/length_dist_test.cc).
#include "planner/workload.h"

#include <cmath>

#include "gtest/gtest.h"

namespace beacon::planner {
namespace {

WorkloadSpec Poisson(double rate) {
  WorkloadSpec w;
  w.arrival = ArrivalKind::kPoisson;
  w.rate = rate;
  w.num_requests = 5000;
  w.prompt = *LengthDist::Parse("uniform:10:100", "p");
  w.output = *LengthDist::Parse("lognormal:500:300", "o");
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
  w.prompt = *LengthDist::Parse("fixed:900", "p");
  w.output = *LengthDist::Parse("fixed:500", "o");
  for (const PlannedRequest& r : GenerateRequests(w, 1000)) {
    EXPECT_EQ(r.prompt_tokens, 900);
    EXPECT_EQ(r.output_tokens, 500);
    EXPECT_EQ(r.max_new_tokens, 100);  // context - prompt
  }
  w.max_tokens = 50;  // outputs longer than max_tokens end by length
  for (const PlannedRequest& r : GenerateRequests(w, 100000)) EXPECT_EQ(r.max_new_tokens, 50);
  w.prompt = *LengthDist::Parse("fixed:5000", "p");
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
