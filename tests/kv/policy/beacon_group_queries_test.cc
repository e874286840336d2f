// BeaconKV with group-shared state (KvPolicyOptions::beacon_group_queries):
// one ring entry and FPS buffer per KV head, of the mean of its group's
// queries. The per-head policy is checked against a brute-force reference in
// beacon_policy_test.cc; here the shared policy is checked against that
// per-head policy run on a model whose heads are the group means (the same
// scores, bit for bit), and shown to differ from per-head state where the
// group has more than one head.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/policies.h"
#include "kv/policy/policy_bytes.h"
#include "tests/kv/beacon_test_util.h"

namespace beacon {
namespace {

using namespace beacon_test;  // NOLINT: test references

constexpr int kLayers = 2, kKvHeads = 2, kDim = 8, kSlots = 50, kTokens = 120, kPromptLen = 6;

PolicyModelInfo Model(int n_heads) {
  PolicyModelInfo m;
  m.n_layers = kLayers;
  m.n_heads = n_heads;
  m.n_kv_heads = kKvHeads;
  m.head_dim = kDim;
  m.rope_theta = 10000.0f;
  return m;
}

KvPolicyOptions Options(bool group_queries, bool bf16_state) {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.recent_queries = 5;  // small buffers: several shrinks within the trace
  o.beacons = 4;
  o.fps_bound = 10;
  o.window = 8;
  o.budget = 24;
  o.beacon_group_queries = group_queries;
  o.beacon_bf16_state = bf16_state;
  return o;
}

// queries[layer][token]: n_heads * kDim floats; keys[layer][kv][slot].
struct Trace {
  std::vector<std::vector<std::vector<float>>> queries;
  std::vector<std::vector<std::vector<Vec>>> keys;
  std::vector<int32_t> positions;
};

Trace MakeTrace(uint32_t seed, int n_heads) {
  std::mt19937 rng(seed);
  Trace tr;
  tr.queries.resize(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    for (int t = 0; t < kTokens; ++t) tr.queries[l].push_back(ToFloats(RandomVec(rng, n_heads * kDim, 1.5)));
  }
  tr.keys.assign(kLayers, std::vector<std::vector<Vec>>(kKvHeads));
  for (int l = 0; l < kLayers; ++l) {
    for (int h = 0; h < kKvHeads; ++h) {
      for (int s = 0; s < kSlots; ++s) tr.keys[l][h].push_back(RandomVec(rng, kDim, 1.0));
    }
  }
  for (int s = 0; s < kSlots; ++s) tr.positions.push_back(s < kPromptLen ? s : kPromptLen + 2 * (s - kPromptLen));
  return tr;
}

// Each KV head's mean query, as the contract states it: summed in head order
// in f32, divided by the group size.
std::vector<float> GroupMeans(const std::vector<float>& q, int group) {
  std::vector<float> out(static_cast<size_t>(kKvHeads) * kDim, 0.0f);
  for (int h = 0; h < kKvHeads * group; ++h) {
    for (int i = 0; i < kDim; ++i) out[(h / group) * kDim + i] += q[h * kDim + i];
  }
  for (float& x : out) x /= static_cast<float>(group);
  return out;
}

// Scores of every (layer, KV head) after `policy` saw the trace's queries
// (transformed by `transform`). (Not `Run`: gtest's Test::Run would hide it.)
template <typename F>
std::vector<std::vector<float>> ScoreAfter(KvPolicy* policy, const Trace& tr, F transform) {
  policy->SetPromptLength(kPromptLen);
  policy->SetProtectedLead(kPromptLen);
  for (int t = 0; t < kTokens; ++t) {
    for (int l = 0; l < kLayers; ++l) {
      const std::vector<float> q = transform(tr.queries[l][t]);
      policy->ObserveQuery(l, q.data(), t);
    }
  }
  TestCache tc(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
  std::vector<std::vector<float>> out;
  for (int l = 0; l < kLayers; ++l) {
    KeysView keys(&tc.cache, &tc.seq, l);
    for (int kv = 0; kv < kKvHeads; ++kv) {
      out.emplace_back(kSlots, -1.0f);
      policy->Score(l, kv, keys, kTokens, out.back().data());
    }
  }
  return out;
}

std::vector<float> Same(const std::vector<float>& q) { return q; }

TEST(BeaconGroupQueries, ScoresAreThePerHeadPolicysOnTheGroupMeans) {
  for (int group : {2, 3}) {
    for (bool bf16 : {true, false}) {
      const Trace tr = MakeTrace(11 + group + bf16, kKvHeads * group);
      std::unique_ptr<KvPolicy> shared = NewBeaconPolicy(Options(true, bf16), Model(kKvHeads * group));
      std::unique_ptr<KvPolicy> on_means = NewBeaconPolicy(Options(false, bf16), Model(kKvHeads));
      const auto got = ScoreAfter(shared.get(), tr, Same);
      const auto want =
          ScoreAfter(on_means.get(), tr, [&](const std::vector<float>& q) { return GroupMeans(q, group); });
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << "group " << group << " bf16 " << bf16 << " (layer, kv) #" << i;
        double mass = 0;
        for (float s : got[i]) mass += s;
        EXPECT_GT(mass, 0.1) << "scored nothing";  // the queries were seen
      }
    }
  }
}

TEST(BeaconGroupQueries, AGroupOfOneIsThePerHeadPolicy) {
  const Trace tr = MakeTrace(5, kKvHeads);
  std::unique_ptr<KvPolicy> shared = NewBeaconPolicy(Options(true, true), Model(kKvHeads));
  std::unique_ptr<KvPolicy> per_head = NewBeaconPolicy(Options(false, true), Model(kKvHeads));
  EXPECT_EQ(ScoreAfter(shared.get(), tr, Same), ScoreAfter(per_head.get(), tr, Same));
}

TEST(BeaconGroupQueries, DiffersFromPerHeadStateOnAGroupOfTwo) {
  const Trace tr = MakeTrace(7, 2 * kKvHeads);
  std::unique_ptr<KvPolicy> shared = NewBeaconPolicy(Options(true, true), Model(2 * kKvHeads));
  std::unique_ptr<KvPolicy> per_head = NewBeaconPolicy(Options(false, true), Model(2 * kKvHeads));
  const auto a = ScoreAfter(shared.get(), tr, Same);
  const auto b = ScoreAfter(per_head.get(), tr, Same);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (int s = 0; s < kSlots; ++s) diff = std::max(diff, static_cast<double>(std::abs(a[i][s] - b[i][s])));
  }
  EXPECT_GT(diff, 1e-3);
}

TEST(BeaconGroupQueries, StateShrinksByTheGroup) {
  PolicyModelInfo m = Model(6 * kKvHeads);  // a group of 6, as on Qwen2.5-1.5B
  KvPolicyOptions per_head = Options(false, true);
  KvPolicyOptions shared = Options(true, true);
  const int64_t positions = static_cast<int64_t>(per_head.recent_queries + per_head.fps_bound) * kLayers * 4;
  const int64_t rows = PolicyStateBytes(per_head, m, 0) - positions;
  EXPECT_EQ(rows, static_cast<int64_t>(15) * kLayers * 12 * kDim * 2);
  EXPECT_EQ(PolicyStateBytes(shared, m, 0) - positions, rows / 6);
  shared.beacon_bf16_state = false;
  EXPECT_EQ(PolicyStateBytes(shared, m, 0) - positions, rows / 6 * 2);
}

TEST(BeaconGroupQueries, ValidateRefusesTheGlobalFilter) {
  KvPolicyOptions o = Options(true, true);
  EXPECT_TRUE(o.Validate().ok());
  o.beacon_filter = BeaconFilter::kGlobal;
  const absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kv_beacon_group_queries"), std::string::npos) << s;
}

}  // namespace
}  // namespace beacon
