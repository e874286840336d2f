// The planner's shared-prefix workload: a share of the requests start with
// one system prompt; with the prefix cache on the simulated scheduler reuses
// its blocks (the real PrefixCache over SimEngine's pool), so fewer prompt
// tokens are priced, first tokens come sooner and the same pool admits more.
#include <cmath>

#include "gtest/gtest.h"
#include "planner/plan_run.h"
#include "tests/planner/planner_test_util.h"

namespace beacon::planner {
namespace {

RunInputs Inputs(const KvPolicyOptions& kv, bool cache, double share) {
  RunInputs in;
  in.model = test::ToyModel();
  in.gpu = test::ToyGpu();
  in.pool.blocks = 2000;
  in.pool.block_size = 16;
  in.pool.bytes_per_block = 16 * in.model.kv_bytes_per_token();
  in.pool.bytes = in.pool.blocks * in.pool.bytes_per_block;
  in.kv = kv;
  in.sched.max_running = 64;
  in.prefix_cache = cache;
  WorkloadSpec& w = in.workload;
  w.arrival = ArrivalKind::kClosedLoop;
  w.concurrency = 64;
  w.num_requests = 64;
  w.prompt = *LengthDist::Parse("fixed:64", "p");  // each request's own question
  w.output = *LengthDist::Parse("fixed:256", "o");
  w.shared_prefix = 1024;
  w.share_ratio = share;
  return in;
}

TEST(SharedPrefix, TheCacheSavesPrefillAndTimeToFirstToken) {
  KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  beacon.budget = 128;
  for (const KvPolicyOptions& kv : {KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), beacon}) {
    SCOPED_TRACE(std::string(kv.policy_name()));
    absl::StatusOr<RunResult> off = RunPlan(Inputs(kv, false, 1.0));
    absl::StatusOr<RunResult> on = RunPlan(Inputs(kv, true, 1.0));
    ASSERT_TRUE(off.ok() && on.ok());
    EXPECT_EQ(off->completed, 64);
    EXPECT_EQ(on->completed, 64);
    EXPECT_EQ(off->prefix_hits, 0);
    // Every request but those admitted with the first one reuses the
    // prefix's 64 blocks: at least 63 x 1,024 tokens, and they are not run.
    EXPECT_GE(on->prefix_hits, 32 * 1024);
    EXPECT_EQ(on->prefix_queries, 64 * (1024 + 64));
    EXPECT_EQ(on->engine.prefill_tokens + on->prefix_hits, off->engine.prefill_tokens);
    EXPECT_LT(on->ttft_s.p50, off->ttft_s.p50 / 2);
    EXPECT_GE(on->peak_running, off->peak_running);
  }
}

TEST(SharedPrefix, TheShareRatioSelectsRequestsAndIsValidated) {
  const KvPolicyOptions full = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  absl::StatusOr<RunResult> none = RunPlan(Inputs(full, true, 0.0));
  absl::StatusOr<RunResult> half = RunPlan(Inputs(full, true, 0.5));
  ASSERT_TRUE(none.ok() && half.ok());
  EXPECT_EQ(none->prefix_hits, 0);
  EXPECT_EQ(none->prefix_queries, 64 * 64);
  // About half the requests carry the prefix (a seeded draw), and reuse it.
  const int64_t with_prefix = (half->prefix_queries - 64 * 64) / 1024;
  EXPECT_GT(with_prefix, 20);
  EXPECT_LT(with_prefix, 44);
  EXPECT_GE(half->prefix_hits, (with_prefix - 4) * 1024);
  RunInputs bad = Inputs(full, true, 1.5);
  absl::Status s = RunPlan(bad).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("share_ratio"), std::string::npos) << s;
}

}  // namespace
}  // namespace beacon::planner
