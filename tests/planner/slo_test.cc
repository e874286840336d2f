// SLO parsing (beacon-loadtest's syntax), judging a run, the sustainable-rate
// search and replicas.
#include "planner/slo.h"

#include "gtest/gtest.h"
#include "tests/planner/planner_test_util.h"

namespace beacon::planner {
namespace {

// The bounds' syntax and errors are workload::ParseSlo's (tests/workload/slo_test.cc);
// here: the delegation, the attainment and Describe.
TEST(Slo, ParsesBoundsAndAttainment) {
  absl::StatusOr<SloSpec> s = ParseSlo("ttft_ms=500, tpot_ms=50", 0.9);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s->bounds.ttft_ms, 500);
  EXPECT_EQ(*s->bounds.tpot_ms, 50);
  EXPECT_FALSE(s->bounds.e2e_ms.has_value());
  EXPECT_TRUE(s->enabled());
  EXPECT_EQ(s->Describe(), "ttft_ms=500,tpot_ms=50 for 90% of requests");
  EXPECT_EQ(SloSpec{}.Describe(), "none");
  EXPECT_EQ(ParseSlo("x_ms=3", 0.9).status().message().rfind("--slo:", 0), 0u);
  for (double bad : {0.0, -0.5, 1.5}) {
    absl::StatusOr<SloSpec> b = ParseSlo("ttft_ms=5", bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(b.status()));
    EXPECT_NE(b.status().message().find("--slo-attainment"), std::string::npos);
  }
}

RunResult Samples(std::vector<std::pair<double, double>> ttft_tpot) {
  RunResult r;
  for (auto [ttft, tpot] : ttft_tpot) {
    RequestSample q;
    q.ok = true;
    q.ttft_s = ttft;
    q.tpot_s = tpot;
    q.output_tokens = 10;
    r.requests.push_back(q);
  }
  return r;
}

TEST(Slo, AttainmentCountsRequestsWithinEveryBound) {
  const SloSpec slo = *ParseSlo("ttft_ms=1000,tpot_ms=50", 0.75);
  // 3 of 4 meet both bounds.
  RunResult r = Samples({{0.5, 0.01}, {0.9, 0.04}, {0.2, 0.02}, {2.0, 0.01}});
  SloVerdict v = CheckSlo(r, slo);
  EXPECT_TRUE(v.met) << v.why;
  EXPECT_DOUBLE_EQ(v.attainment, 0.75);
  r.requests[1].tpot_s = 0.06;  // now 2 of 4
  v = CheckSlo(r, slo);
  EXPECT_FALSE(v.met);
  EXPECT_NE(v.why.find("ttft 1, tpot 1"), std::string::npos) << v.why;
  // Warm-up requests are not judged.
  const SloSpec all = *ParseSlo("ttft_ms=1000", 1.0);
  r = Samples({{5.0, 0.01}, {0.1, 0.01}, {0.1, 0.01}});
  EXPECT_FALSE(CheckSlo(r, all).met);
  EXPECT_TRUE(CheckSlo(r, all, /*warmup=*/1).met);
  // A rejection fails the SLO outright.
  r = Samples({{0.1, 0.01}});
  r.rejected = 1;
  EXPECT_FALSE(CheckSlo(r, slo).met);
}

TEST(Slo, Replicas) {
  EXPECT_EQ(ReplicasFor(10, 2.5), 4);
  EXPECT_EQ(ReplicasFor(10, 3), 4);
  EXPECT_EQ(ReplicasFor(0.5, 3), 1);
  EXPECT_EQ(ReplicasFor(10, 0), -1);
}

TEST(Slo, SearchFindsTheRateWhereTtftBreaks) {
  RunInputs in;
  in.model = test::ToyModel();
  in.gpu = test::ToyGpu();
  in.gpu.step_host_overhead_s = 1e-3;  // 1 ms per step: a clock one can reason about
  in.pool.blocks = 2000;
  in.pool.block_size = 16;
  in.pool.bytes_per_block = 16 * in.model.kv_bytes_per_token();
  in.pool.bytes = in.pool.blocks * in.pool.bytes_per_block;
  in.sched.max_running = 8;
  in.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  in.workload.prompt = *LengthDist::Parse("fixed:64", "p");
  in.workload.output = *LengthDist::Parse("uniform:50:150", "o");
  in.workload.num_requests = 200;
  // Each request decodes ~100 steps of ~1 ms; 8 at a time: ~80 requests/s at saturation.
  const SloSpec slo = *ParseSlo("ttft_ms=50", 0.9);
  absl::StatusOr<CapacityResult> c = FindMaxRate(in, slo, SearchOptions{});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(c->saturation_rate, 60);
  EXPECT_LT(c->saturation_rate, 100);
  EXPECT_GT(c->max_rate, 0);
  EXPECT_LE(c->max_rate, kUtilisationCeiling * c->saturation_rate);
  EXPECT_TRUE(c->at_max.met);
  EXPECT_GE(c->probes, 3);
  // An SLO below one step's time cannot be met at any rate.
  absl::StatusOr<CapacityResult> never = FindMaxRate(in, *ParseSlo("tpot_ms=0.5", 0.9), SearchOptions{});
  ASSERT_TRUE(never.ok()) << never.status();
  EXPECT_EQ(never->max_rate, 0);
  EXPECT_EQ(ReplicasFor(10, never->max_rate), -1);
}

}  // namespace
}  // namespace beacon::planner
