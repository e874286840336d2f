// kv/policy/policy_bytes.h: what a sequence's KV memory holds, policy state
// included, and a slot budget from a byte budget (issue 45); and the
// policies' protected windows of their papers (policy_registry.h).
#include "kv/policy/policy_bytes.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv/policy/policy_registry.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

// Qwen2.5-1.5B's shape (the evaluation model): 28 layers, 12 query heads, 2
// KV heads, head_dim 128.
PolicyModelInfo Qwen15B() {
  PolicyModelInfo m;
  m.n_layers = 28, m.n_heads = 12, m.n_kv_heads = 2, m.head_dim = 128;
  return m;
}

TEST(PolicyBytes, KvSlotIsKeyValueAndPositionOfEveryLayerAndHead) {
  // 28 layers x 2 KV heads x (K and V of 128 bf16 + an int32 position).
  EXPECT_EQ(KvBytesPerSlot(Qwen15B(), 128 * 2), 28 * 2 * (2 * 128 * 2 + 4));
  EXPECT_EQ(KvBytesPerSlot(Qwen15B(), 128 * 4), 28 * 2 * (2 * 128 * 4 + 4));
  EXPECT_EQ(KvBytesPerSlot(Qwen15B(), 136), 28 * 2 * (2 * 136 + 4));  // q8_0: 4 blocks of 34 bytes
}

TEST(PolicyBytes, EachPolicysState) {
  const PolicyModelInfo m = Qwen15B();
  const int64_t row = 12 * 128 * 2 + 4;  // one query of every head in bf16, and its position
  auto of = [&](const char* name, int32_t slots) {
    return PolicyStateBytes(*KvPolicyOptions::DefaultsForName(name), m, slots);
  };
  // BeaconKV: R = 4 ring rows and U = 16 FPS points per head and layer (the
  // defaults since issue 45): 1.7 MB, 60 slots' worth of this model's KV.
  EXPECT_EQ(of("beacon", 0), (4 + 16) * 28 * row);
  EXPECT_EQ(of("beacon", 0), 1'722'560);
  // The defaults before: R = 16, U = 64, the 6.9 MB issue 45 counted, 238 slots' worth.
  KvPolicyOptions before = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  before.recent_queries = 16, before.beacons = 16, before.fps_bound = 64;
  EXPECT_EQ(PolicyStateBytes(before, m, 0), 6'890'240);
  KvPolicyOptions f32 = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  f32.beacon_bf16_state = false;
  EXPECT_EQ(PolicyStateBytes(f32, m, 0), (4 + 16) * 28 * (12 * 128 * 4 + 4));
  EXPECT_EQ(of("snapkv", 0), 32 * 28 * row);  // observation window 32
  EXPECT_EQ(of("rkv", 0), 8 * 28 * row);      // 8 recent queries
  // H2O: an f32 accumulator per slot, KV head and layer.
  EXPECT_EQ(of("h2o", 0), 0);
  EXPECT_EQ(of("h2o", 300), 300 * 28 * 2 * 4);
  for (const char* stateless : {"full", "streaming", "random"}) EXPECT_EQ(of(stateless, 300), 0) << stateless;
}

TEST(PolicyBytes, BudgetForBytesLeavesTheStateItsShare) {
  const PolicyModelInfo m = Qwen15B();
  const int64_t slot = KvBytesPerSlot(m, 256);
  const int64_t bytes = 256 * slot;  // what 256 slots of the full cache take
  auto budget = [&](const char* name, int32_t min_budget) {
    return BudgetForBytes(*KvPolicyOptions::DefaultsForName(name), m, 256, bytes, min_budget);
  };
  EXPECT_EQ(*budget("streaming", 1), 256);
  EXPECT_EQ(*budget("h2o", 1), bytes / (slot + 28 * 2 * 4));  // 254
  EXPECT_EQ(*budget("snapkv", 1), (bytes - 2'756'096) / slot);
  EXPECT_EQ(*budget("beacon", 1), (bytes - 1'722'560) / slot);  // 196 (17 with the state before issue 45)
  // Under the minimum budget asked for: refused, naming the field and the state.
  absl::StatusOr<int32_t> low = budget("beacon", 200);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(low.status().message()), HasSubstr("kv_budget_bytes"));
  EXPECT_THAT(std::string(low.status().message()), HasSubstr("1722560 bytes"));
  EXPECT_FALSE(budget("snapkv", 1 << 20).ok());
  EXPECT_FALSE(BudgetForBytes(KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon), m, 256, -5, 1).ok());
}

TEST(PolicyBytes, ProtectedWindowsOfThePapers) {
  KvPolicyOptions snap = KvPolicyOptions::DefaultsFor(KvPolicyKind::kSnapKv);
  snap.window = 8;
  snap.budget = 256;
  EXPECT_EQ(ProtectedWindow(snap), 32) << "SnapKV keeps its observation window";
  snap.budget = 24;
  snap.window = 4;
  EXPECT_EQ(ProtectedWindow(snap), 24) << "never more than the budget";
  KvPolicyOptions h2o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kH2o);
  h2o.window = 8;
  h2o.budget = 256;
  EXPECT_EQ(ProtectedWindow(h2o), 128) << "H2O: recent and heavy 1:1";
  h2o.window = 200;
  EXPECT_EQ(ProtectedWindow(h2o), 200) << "never less than the operator's window";
  for (KvPolicyKind k : {KvPolicyKind::kBeacon, KvPolicyKind::kRkv, KvPolicyKind::kStreaming}) {
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(k);
    o.window = 8;
    o.budget = 256;
    EXPECT_EQ(ProtectedWindow(o), 8) << KvPolicyName(k);
  }
}

}  // namespace
}  // namespace beacon
