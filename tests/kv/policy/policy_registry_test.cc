// The KV policy registry: every row is reachable by its name and its kind,
// builds a policy object that calls itself by the row's name, has valid
// published defaults, and the derived lists (names for flags, the default
// lists of the benchmarks) follow the table.
#include "kv/policy/policy_registry.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace beacon {
namespace {

PolicyModelInfo Model() {
  PolicyModelInfo m;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 8;
  return m;
}

TEST(PolicyRegistry, EveryRowIsFoundByNameAndKindAndBuildsItself) {
  std::set<std::string> names;
  ASSERT_EQ(KvPolicyRegistry().size(), KvPolicyKinds().size());
  for (const KvPolicySpec& s : KvPolicyRegistry()) {
    SCOPED_TRACE(std::string(s.name));
    EXPECT_TRUE(names.insert(std::string(s.name)).second) << "duplicate name";
    for (char c : s.name) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
    EXPECT_FALSE(s.summary.empty());
    EXPECT_EQ(&KvPolicySpecOf(s.kind), &s);
    EXPECT_EQ(KvPolicyName(s.kind), s.name);
    absl::StatusOr<KvPolicyKind> parsed = ParseKvPolicy(s.name);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s.kind);
    const KvPolicyOptions o = KvPolicyOptions::DefaultsFor(s.kind);
    EXPECT_EQ(o.policy, s.kind);
    EXPECT_TRUE(o.Validate().ok()) << o.Validate();
    absl::StatusOr<std::unique_ptr<KvPolicy>> p = CreateKvPolicy(o, Model());
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->name(), s.name);
    EXPECT_EQ((*p)->options().policy, s.kind);
  }
  EXPECT_EQ(ParseKvPolicy("lru").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ParseKvPolicy("lru").status().message().find("known: full, streaming"), std::string::npos);
}

TEST(PolicyRegistry, PublishedSettingsAndWhatAnEvictionReads) {
  const KvPolicyOptions snap = KvPolicyOptions::DefaultsFor(KvPolicyKind::kSnapKv);
  EXPECT_EQ(snap.recent_queries, 32);
  EXPECT_EQ(snap.pool_kernel, 7);
  const KvPolicyOptions rkv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kRkv);
  EXPECT_EQ(rkv.recent_queries, 8);
  EXPECT_TRUE(KvPolicySpecOf(KvPolicyKind::kRkv).key_redundancy);
  EXPECT_EQ(KvPolicySpecOf(KvPolicyKind::kRkv).scoring_queries(rkv), 8);

  KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  const KvPolicySpec& b = KvPolicySpecOf(KvPolicyKind::kBeacon);
  EXPECT_EQ(b.scoring_queries(beacon), beacon.recent_queries + beacon.beacons);
  EXPECT_FALSE(b.observes_attention(beacon));
  beacon.beacon_filter = BeaconFilter::kGlobal;  // chooses its queries by their attention
  EXPECT_TRUE(b.observes_attention(beacon));
  EXPECT_TRUE(KvPolicySpecOf(KvPolicyKind::kH2o).observes_attention(beacon));
  EXPECT_EQ(KvPolicySpecOf(KvPolicyKind::kStreaming).scoring_queries, nullptr);
}

TEST(PolicyRegistry, DerivedListsFollowTheTable) {
  EXPECT_EQ(AllPolicyNames(), "full,streaming,h2o,snapkv,rkv,random,beacon");
  EXPECT_EQ(CompressingPolicyNames(), "streaming,h2o,snapkv,rkv,random,beacon");
  absl::StatusOr<std::vector<KvPolicyKind>> all = ParseKvPolicies(CompressingPolicyNames());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), KvPolicyRegistry().size() - 1);
}

}  // namespace
}  // namespace beacon
