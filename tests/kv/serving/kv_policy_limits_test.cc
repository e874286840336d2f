#include "kv/serving/kv_policy_limits.h"

#include "gtest/gtest.h"

namespace beacon {
namespace {

KvPolicyOptions OperatorDefault() {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.budget = 1024;
  o.interval = 64;
  o.window = 16;
  return o;
}

TEST(KvPolicyLimits, RequestWithoutKvFieldsGetsTheOperatorDefault) {
  auto o = ResolveRequestKvOptions(OperatorDefault(), {}, std::nullopt, std::nullopt);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->policy, KvPolicyKind::kBeacon);
  EXPECT_EQ(o->budget, 1024);
  EXPECT_EQ(o->interval, 64);
}

TEST(KvPolicyLimits, SwitchingPolicyTakesItsPublishedScoringButTheOperatorsCadence) {
  auto o = ResolveRequestKvOptions(OperatorDefault(), {}, std::string("rkv"), 256);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->policy, KvPolicyKind::kRkv);
  EXPECT_EQ(o->recent_queries, 8);  // R-KV's own
  EXPECT_EQ(o->pool_kernel, 7);
  EXPECT_EQ(o->budget, 256);   // the request's
  EXPECT_EQ(o->interval, 64);  // the operator's
  EXPECT_EQ(o->window, 16);
}

TEST(KvPolicyLimits, OutOfLimitsNamesTheFieldAndTheRange) {
  KvPolicyLimits limits;
  limits.allowed_policies = {KvPolicyKind::kBeacon, KvPolicyKind::kSnapKv};
  limits.min_budget = 128;
  limits.max_budget = 4096;
  auto bad_budget = ResolveRequestKvOptions(OperatorDefault(), limits, std::nullopt, 64);
  EXPECT_EQ(bad_budget.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_budget.status().message().find("kv_budget: 64 is outside the server's range [128, 4096]"),
            std::string::npos)
      << bad_budget.status();
  auto not_allowed = ResolveRequestKvOptions(OperatorDefault(), limits, std::string("h2o"), std::nullopt);
  EXPECT_NE(not_allowed.status().message().find("kv_policy: 'h2o' is not allowed"), std::string::npos);
  EXPECT_NE(not_allowed.status().message().find("beacon, snapkv"), std::string::npos);
  auto unknown = ResolveRequestKvOptions(OperatorDefault(), limits, std::string("lru"), std::nullopt);
  EXPECT_NE(unknown.status().message().find("unknown policy 'lru'"), std::string::npos);
  // A budget that cannot hold the window is refused by option validation.
  KvPolicyLimits wide;
  wide.min_budget = 1;
  auto tiny = ResolveRequestKvOptions(OperatorDefault(), wide, std::nullopt, 8);
  EXPECT_NE(tiny.status().message().find("kv_budget"), std::string::npos);
}

TEST(KvPolicyLimits, FullCanBeForbidden) {
  KvPolicyLimits limits;
  limits.allow_full = false;
  auto o = ResolveRequestKvOptions(OperatorDefault(), limits, std::string("full"), std::nullopt);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  limits.allow_full = true;
  EXPECT_TRUE(ResolveRequestKvOptions(OperatorDefault(), limits, std::string("full"), std::nullopt).ok());
  KvPolicyLimits broken;
  broken.min_budget = 10;
  broken.max_budget = 5;
  EXPECT_EQ(broken.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace beacon
