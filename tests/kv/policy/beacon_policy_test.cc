// The BeaconKV policy against a brute-force reference written independently
// in beacon_test_util.h (own RoPE, softmax, FPS, selection): scores, kept
// sets (SelectKeep and a full SequenceCompressor eviction), both RoPE
// layouts, pooling on and off, both beacon filters.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/policies.h"
#include "kv/policy/selection.h"
#include "kv/policy/sequence_compressor.h"
#include "tests/kv/beacon_test_util.h"

namespace beacon {
namespace beacon_policy_test {
namespace {

using namespace beacon_test;  // NOLINT: test references

constexpr int kLayers = 2, kHeads = 4, kKvHeads = 2, kDim = 8, kGroup = 2;
constexpr int kSlots = 60, kTokens = 150, kPromptTokens = 20;
constexpr int kAttSlots = 40;  // n_slots reported with the crafted attention
constexpr int32_t kPromptLen = 6, kBudget = 24, kKeep = kPromptLen + kBudget;

// Everything the policy is shown, and what the reference needs to replay it.
struct Trace {
  std::vector<std::vector<Vec>> queries;               // [layer][token] -> [n_heads * d]
  std::vector<std::vector<std::vector<char>>> admit;   // [layer][token][head], decode tokens
  std::vector<std::vector<std::vector<float>>> probs;  // [layer][token] -> [kv][group][kAttSlots]
  std::vector<std::vector<std::vector<Vec>>> keys;     // [layer][kv_head][slot]
  std::vector<int32_t> positions;                      // [slot]
};

// Decode step t: head h's attention mass on the evictable slots (beyond the
// last `window` of the kAttSlots slots and past the protected `lead`) is
// drawn clearly above or below the 0.5 threshold, per a coin the reference
// replays; the lead's mass counts with the window's, which the filter ignores.
Trace MakeTrace(uint32_t seed, int window, int lead = 0) {
  std::mt19937 rng(seed);
  Trace tr;
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  tr.queries.resize(kLayers);
  tr.admit.assign(kLayers, std::vector<std::vector<char>>(kTokens, std::vector<char>(kHeads, 0)));
  tr.probs.resize(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    for (int t = 0; t < kTokens; ++t) {
      tr.queries[l].push_back(RandomVec(rng, kHeads * kDim, 1.5));
      std::vector<float> p(static_cast<size_t>(kHeads) * kAttSlots);
      for (int h = 0; h < kHeads; ++h) {
        const bool admit = rng() % 2 == 1;
        tr.admit[l][t][h] = t >= kPromptTokens && admit;
        const float far = admit ? 0.55f + 0.4f * u01(rng) : 0.05f + 0.4f * u01(rng);
        float* row = p.data() + static_cast<size_t>(h) * kAttSlots;  // head h = kv * group + g
        double wf = 0, wn = 0;
        auto evictable = [&](int s) { return s >= lead && s < kAttSlots - window; };
        for (int s = 0; s < kAttSlots; ++s) (evictable(s) ? wf : wn) += (row[s] = 0.1f + u01(rng));
        for (int s = 0; s < kAttSlots; ++s) row[s] *= evictable(s) ? far / wf : (1 - far) / wn;
      }
      tr.probs[l].push_back(std::move(p));
    }
  }
  tr.keys.assign(kLayers, std::vector<std::vector<Vec>>(kKvHeads));
  for (int l = 0; l < kLayers; ++l) {
    for (int h = 0; h < kKvHeads; ++h) {
      for (int s = 0; s < kSlots; ++s) tr.keys[l][h].push_back(RandomVec(rng, kDim, 1.0));
    }
  }
  // The slots of an already-compressed sequence: the prompt, a sorted random
  // subset of the middle, the recent tail.
  std::vector<int32_t> middle;
  for (int32_t p = kPromptLen; p < kTokens - 8; ++p) middle.push_back(p);
  std::shuffle(middle.begin(), middle.end(), rng);
  middle.resize(kSlots - kPromptLen - 8);
  for (int32_t p = 0; p < kPromptLen; ++p) tr.positions.push_back(p);
  std::sort(middle.begin(), middle.end());
  tr.positions.insert(tr.positions.end(), middle.begin(), middle.end());
  for (int32_t p = kTokens - 8; p < kTokens; ++p) tr.positions.push_back(p);
  return tr;
}

// Prompt tokens get ObserveQuery only; decode tokens also ObserveAttention
// when asked for: on layer 0 both KV heads at once from two threads (the
// contract allows it), on layer 1 in reverse head order.
void Feed(KvPolicy* policy, const Trace& tr) {
  for (int t = 0; t < kTokens; ++t) {
    for (int l = 0; l < kLayers; ++l) {
      const std::vector<float> q = ToFloats(tr.queries[l][t]);
      policy->ObserveQuery(l, q.data(), t);
      if (t < kPromptTokens || !policy->wants_attention()) continue;
      auto observe = [&](int kv) {
        policy->ObserveAttention(l, kv, tr.probs[l][t].data() + static_cast<size_t>(kv) * kGroup * kAttSlots, kGroup,
                                 kAttSlots);
      };
      if (l == 0) {
        std::thread other(observe, 1);
        observe(0);
        other.join();
      } else {
        observe(1);
        observe(0);
      }
    }
  }
}

enum class Admission { kAsTraced, kEveryDecodeQuery };

// Brute force: per query head, replay the buffer, take its beacons and the
// last R queries, softmax over every slot, max over heads and queries, pool.
Vec ReferenceScores(const Trace& tr, const KvPolicyOptions& o, bool interleaved, int layer, int kv, Admission adm) {
  Vec scores(kSlots, 0.0);
  for (int g = 0; g < kGroup; ++g) {
    const int h = kv * kGroup + g;
    auto head_q = [&](int t) {
      return StateRounded(Vec(tr.queries[layer][t].begin() + h * kDim, tr.queries[layer][t].begin() + (h + 1) * kDim),
                          o.beacon_bf16_state);
    };
    // Buffer (layer, h) first shrinks at U - phase (kernels/cuda/beacon_fps_phase.h).
    RefContinual buffer{o.fps_bound, o.beacons, RefPhase(layer * kHeads + h, kLayers * kHeads, o.fps_bound, o.beacons)};
    for (int t = 0; t < kTokens; ++t) {
      // kAll: every query, or (beacon_prompt_queries off) the generated ones.
      bool in = o.beacon_filter == BeaconFilter::kAll && (o.beacon_prompt_queries || t >= kPromptLen);
      if (o.beacon_filter == BeaconFilter::kGlobal) {
        in = adm == Admission::kAsTraced ? tr.admit[layer][t][h] != 0 : t >= kPromptTokens;
      }
      if (in) buffer.Add(head_q(t), t);
    }
    // Recent queries score causally (keys up to their own position), the
    // beacons at the current position (every key).
    std::vector<std::pair<Vec, int32_t>> scoring;
    for (int t = std::max(0, kTokens - o.recent_queries); t < kTokens; ++t) {
      scoring.emplace_back(RefRope(head_q(t), t, 10000.0, interleaved), t);
    }
    for (const Vec& b : buffer.Beacons()) scoring.emplace_back(RefRope(b, kTokens, 10000.0, interleaved), kTokens);
    for (const auto& [q, qpos] : scoring) {
      const Vec p = RefCausalAttention(q, tr.keys[layer][kv], tr.positions, qpos);
      for (int s = 0; s < kSlots; ++s) scores[s] = std::max(scores[s], p[s]);
    }
  }
  return RefMaxPool(scores, o.pool_kernel);
}

PolicyModelInfo Model(bool interleaved) {
  PolicyModelInfo m;
  m.n_layers = kLayers;
  m.n_heads = kHeads;
  m.n_kv_heads = kKvHeads;
  m.head_dim = kDim;
  m.rope_theta = 10000.0f;
  m.rope_interleaved = interleaved;
  return m;
}

// (interleaved RoPE, pool kernel, filter, small buffers R=5 K=4 U=10 vs
// defaults, beacon_prompt_queries, beacon_bf16_state)
class BeaconPolicyTest : public testing::TestWithParam<std::tuple<bool, int, BeaconFilter, bool, bool, bool>> {
 protected:
  KvPolicyOptions Options() const {
    auto [interleaved, pool, filter, small, prompt_queries, bf16_state] = GetParam();
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
    o.beacon_bf16_state = bf16_state;
    o.pool_kernel = pool;
    o.beacon_filter = filter;
    o.beacon_prompt_queries = prompt_queries;
    o.window = 8;
    o.sinks = 4;
    o.budget = kBudget;
    if (small) {
      o.recent_queries = 5;
      o.beacons = 4;
      o.fps_bound = 10;
    }
    return o;
  }
};

TEST_P(BeaconPolicyTest, ScoresAndKeptSetsMatchBruteForce) {
  const bool interleaved = std::get<0>(GetParam());
  const KvPolicyOptions o = Options();
  ASSERT_TRUE(o.Validate().ok());
  // The compressor below protects the prompt (and sinks) as the lead.
  const int32_t lead = std::max(kPromptLen, o.sinks);
  const Trace tr = MakeTrace(77 + 2 * interleaved + std::get<1>(GetParam()), o.window, lead);
  std::unique_ptr<KvPolicy> policy = NewBeaconPolicy(o, Model(interleaved));
  policy->SetProtectedLead(lead);
  policy->SetPromptLength(kPromptLen);
  EXPECT_EQ(policy->name(), "beacon");
  EXPECT_EQ(policy->wants_attention(), o.beacon_filter == BeaconFilter::kGlobal);
  Feed(policy.get(), tr);

  TestCache tc(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
  const Protection prot{kPromptLen, true, o.sinks, o.window};
  std::vector<std::vector<int32_t>> want_keep(kLayers * kKvHeads);
  for (int l = 0; l < kLayers; ++l) {
    KeysView keys(&tc.cache, &tc.seq, l);
    for (int kv = 0; kv < kKvHeads; ++kv) {
      std::vector<float> got(kSlots, -1.0f);
      policy->Score(l, kv, keys, kTokens, got.data());
      const Vec want = ReferenceScores(tr, o, interleaved, l, kv, Admission::kAsTraced);
      for (int s = 0; s < kSlots; ++s)
        ASSERT_NEAR(got[s], want[s], 1e-5) << "layer " << l << " kv " << kv << " slot " << s;
      {
        // The state's type is visible: the reference of the other type
        // scores differently (the rounding is applied, or not).
        KvPolicyOptions other_state = o;
        other_state.beacon_bf16_state = !o.beacon_bf16_state;
        const Vec other = ReferenceScores(tr, other_state, interleaved, l, kv, Admission::kAsTraced);
        double diff = 0;
        for (int s = 0; s < kSlots; ++s) diff = std::max(diff, std::abs(other[s] - want[s]));
        EXPECT_GT(diff, 1e-5) << "layer " << l << " kv " << kv;
      }
      if (o.beacon_filter == BeaconFilter::kGlobal) {
        // The filter is visible: admitting every decode query scores differently.
        const Vec unfiltered = ReferenceScores(tr, o, interleaved, l, kv, Admission::kEveryDecodeQuery);
        double diff = 0;
        for (int s = 0; s < kSlots; ++s) diff = std::max(diff, std::abs(unfiltered[s] - want[s]));
        EXPECT_GT(diff, 1e-3) << "layer " << l << " kv " << kv;
      }
      if (o.beacon_filter == BeaconFilter::kAll && !o.beacon_prompt_queries && !std::get<3>(GetParam())) {
        // The option is visible: admitting the prompt's queries too scores
        // differently. (Not with the small buffers: there the 6 prompt
        // queries are one refill, U - K, and FPS has forgotten them by the
        // end; PromptQueriesOffNeverBecomeBeacons plants ones it keeps.)
        KvPolicyOptions with_prompt = o;
        with_prompt.beacon_prompt_queries = true;
        const Vec other = ReferenceScores(tr, with_prompt, interleaved, l, kv, Admission::kAsTraced);
        double diff = 0;
        for (int s = 0; s < kSlots; ++s) diff = std::max(diff, std::abs(other[s] - want[s]));
        EXPECT_GT(diff, 1e-4) << "layer " << l << " kv " << kv;
      }
      std::vector<int32_t> keep;
      SelectKeep(got.data(), keys, kv, prot, kKeep, &keep);
      want_keep[l * kKvHeads + kv] = RefSelect(want, tr.positions, kPromptLen, true, o.sinks, o.window, kKeep);
      EXPECT_EQ(keep, want_keep[l * kKvHeads + kv]) << "layer " << l << " kv " << kv;
    }
  }

  // The same trace through a whole eviction: every (layer, KV head) holds
  // exactly the reference's kept tokens, in order, with their keys.
  absl::StatusOr<std::unique_ptr<SequenceCompressor>> comp =
      SequenceCompressor::Create(o, Model(interleaved), kPromptLen);
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_EQ((*comp)->bound(), kKeep);
  Feed((*comp)->policy(), tr);
  TestCache evicted(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
  EXPECT_EQ((*comp)->Evict(&evicted.seq, kTokens), kSlots - kKeep);
  ASSERT_EQ(evicted.seq.num_slots(), kKeep);
  for (int l = 0; l < kLayers; ++l) {
    KeysView keys(&evicted.cache, &evicted.seq, l);
    for (int kv = 0; kv < kKvHeads; ++kv) {
      const std::vector<int32_t>& want = want_keep[l * kKvHeads + kv];
      for (int i = 0; i < kKeep; ++i) {
        ASSERT_EQ(keys.position(kv, i), tr.positions[want[i]]) << "layer " << l << " kv " << kv << " slot " << i;
        ASSERT_EQ(keys.key(kv, i)[3], static_cast<float>(tr.keys[l][kv][want[i]][3]));
      }
    }
  }
}

std::string ParamName(const testing::TestParamInfo<BeaconPolicyTest::ParamType>& info) {
  const auto& [interleaved, pool, filter, small, prompt_queries, bf16_state] = info.param;
  return std::string(interleaved ? "Interleaved" : "Half") + "Pool" + std::to_string(pool) +
         (filter == BeaconFilter::kAll ? "All" : "Global") + (small ? "Small" : "Defaults") +
         (prompt_queries ? "PromptQueries" : "NoPromptQueries") + (bf16_state ? "Bf16State" : "F32State");
}

INSTANTIATE_TEST_SUITE_P(All, BeaconPolicyTest,
                         testing::Combine(testing::Bool(), testing::Values(1, 3),
                                          testing::Values(BeaconFilter::kAll, BeaconFilter::kGlobal), testing::Bool(),
                                          testing::Bool(), testing::Bool()),
                         ParamName);

// With a 2-thread pool the compressor scores every (layer, KV head) in
// parallel, compacts the layers in parallel, and the policy runs its FPS
// shrinks in parallel: the kept slots and their keys equal the serial run's
// exactly (and ThreadSanitizer watches the concurrent Score and compaction
// calls in the TSan build).
TEST(BeaconPolicy, ParallelEvictionAndShrinksEqualTheSerialRun) {
  for (bool small : {false, true}) {
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
    o.window = 8;
    o.sinks = 4;
    o.budget = kBudget;
    // Small: shrinks every 6 tokens; the 8 buffers' phases are 0 0 1 2 | 3 3 4 5,
    // so each layer has a token with two shrinks, which run on the pool.
    if (small) o.recent_queries = 5, o.beacons = 4, o.fps_bound = 10;
    const Trace tr = MakeTrace(5 + small, o.window);
    ThreadPool pool(2);
    ASSERT_EQ(pool.n_threads(), 2);
    std::vector<std::vector<int32_t>> kept[2];
    std::vector<float> keys0[2];
    for (int run = 0; run < 2; ++run) {
      absl::StatusOr<std::unique_ptr<SequenceCompressor>> comp =
          SequenceCompressor::Create(o, Model(false), kPromptLen);
      ASSERT_TRUE(comp.ok()) << comp.status();
      if (run == 1) (*comp)->set_thread_pool(&pool);
      EXPECT_TRUE((*comp)->policy()->concurrent_scoring());
      Feed((*comp)->policy(), tr);
      TestCache tc(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
      ASSERT_EQ((*comp)->Evict(&tc.seq, kTokens), kSlots - kKeep);
      for (int l = 0; l < kLayers; ++l) {
        KeysView keys(&tc.cache, &tc.seq, l);
        for (int kv = 0; kv < kKvHeads; ++kv) {
          kept[run].emplace_back();
          for (int i = 0; i < keys.n_slots(); ++i) {
            kept[run].back().push_back(keys.position(kv, i));
            keys0[run].push_back(keys.key(kv, i)[0]);
          }
        }
      }
    }
    EXPECT_EQ(kept[0], kept[1]) << (small ? "small buffers" : "defaults");
    EXPECT_EQ(keys0[0], keys0[1]) << (small ? "small buffers" : "defaults");
  }
}

TEST(BeaconPolicy, ScoresZeroBeforeAnyQuery) {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  std::unique_ptr<KvPolicy> policy = NewBeaconPolicy(o, Model(false));
  const Trace tr = MakeTrace(5, o.window);
  TestCache tc(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
  std::vector<float> got(kSlots, -1.0f);
  policy->Score(1, 1, KeysView(&tc.cache, &tc.seq, 1), kTokens, got.data());
  for (float s : got) EXPECT_EQ(s, 0.0f);
}

// kGlobal: a query whose attention is never reported (a prompt token) or
// whose report arrives with nothing beyond the window is not a beacon, so
// with only such queries the beacons are empty and only the ring scores.
TEST(BeaconPolicy, GlobalFilterIgnoresUnreportedAndWindowOnlyQueries) {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.beacon_filter = BeaconFilter::kGlobal;
  o.recent_queries = 1;
  o.window = 4;
  o.global_threshold = 0.0f;
  const Trace tr = MakeTrace(9, o.window);
  std::unique_ptr<KvPolicy> policy = NewBeaconPolicy(o, Model(false));
  for (int t = 0; t < 10; ++t) policy->ObserveQuery(0, ToFloats(tr.queries[0][t]).data(), t);  // "prompt"
  // Decode token 10: all attention inside the 4-slot window of 4 slots.
  const std::vector<float> probs(kGroup * 4, 0.25f);
  policy->ObserveQuery(0, ToFloats(tr.queries[0][10]).data(), 10);
  policy->ObserveAttention(0, 0, probs.data(), kGroup, 4);
  // A second report for the same query, now all beyond the window, comes too
  // late: a query is judged once.
  std::vector<float> far(kGroup * 8, 0.0f);
  for (int g = 0; g < kGroup; ++g) std::fill(far.begin() + g * 8, far.begin() + g * 8 + 4, 0.25f);
  policy->ObserveAttention(0, 0, far.data(), kGroup, 8);
  TestCache tc(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
  std::vector<float> got(kSlots);
  policy->Score(0, 0, KeysView(&tc.cache, &tc.seq, 0), 11, got.data());
  Vec want(kSlots, 0.0);
  for (int g = 0; g < kGroup; ++g) {
    const Vec q = StateRounded(Vec(tr.queries[0][10].begin() + g * kDim, tr.queries[0][10].begin() + (g + 1) * kDim),
                               o.beacon_bf16_state);
    const Vec p = RefCausalAttention(RefRope(q, 10, 10000.0, false), tr.keys[0][0], tr.positions, 10);
    for (int s = 0; s < kSlots; ++s) want[s] = std::max(want[s], p[s]);
  }
  for (int s = 0; s < kSlots; ++s) ASSERT_NEAR(got[s], want[s], 1e-6) << s;
}

// kGlobal measures mass on evictable slots only: attention on the protected
// lead (prompt, sinks) beyond the window does not admit a query. It used to:
// heads that sink their attention passed the filter on every step.
TEST(BeaconPolicy, GlobalFilterIgnoresMassOnTheProtectedLead) {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.beacon_filter = BeaconFilter::kGlobal;
  o.recent_queries = 1;
  o.window = 4;
  o.global_threshold = 0.5f;
  const Trace tr = MakeTrace(9, o.window);
  auto score_with = [&](int32_t lead, const std::vector<float>& probs) {
    std::unique_ptr<KvPolicy> policy = NewBeaconPolicy(o, Model(false));
    policy->SetProtectedLead(lead);
    policy->ObserveQuery(0, ToFloats(tr.queries[0][3]).data(), 3);
    policy->ObserveAttention(0, 0, probs.data(), kGroup, 12);
    policy->ObserveQuery(0, ToFloats(tr.queries[0][10]).data(), 10);  // the ring's only query
    TestCache tc(KvCacheShape{kLayers, kKvHeads, kDim, 16}, tr.keys, tr.positions);
    std::vector<float> got(kSlots);
    policy->Score(0, 0, KeysView(&tc.cache, &tc.seq, 0), 11, got.data());
    return got;
  };
  // Token 3 puts 0.9 of its attention on slots 0-1, beyond the 4-slot
  // window of 12 slots.
  std::vector<float> sunk(kGroup * 12, 0.0f);
  for (int g = 0; g < kGroup; ++g) {
    sunk[g * 12 + 0] = 0.45f;
    sunk[g * 12 + 1] = 0.45f;
    sunk[g * 12 + 11] = 0.1f;
  }
  const std::vector<float> no_lead = score_with(0, sunk);  // slots 0-1 evictable: token 3 is a beacon
  const std::vector<float> lead = score_with(2, sunk);     // slots 0-1 protected: it is not
  Vec ring_only(kSlots, 0.0);
  for (int g = 0; g < kGroup; ++g) {
    const Vec q = StateRounded(Vec(tr.queries[0][10].begin() + g * kDim, tr.queries[0][10].begin() + (g + 1) * kDim),
                               o.beacon_bf16_state);
    const Vec p = RefCausalAttention(RefRope(q, 10, 10000.0, false), tr.keys[0][0], tr.positions, 10);
    for (int s = 0; s < kSlots; ++s) ring_only[s] = std::max(ring_only[s], p[s]);
  }
  bool differs = false;
  for (int s = 0; s < kSlots; ++s) {
    ASSERT_NEAR(lead[s], ring_only[s], 1e-6) << s;
    differs |= std::abs(no_lead[s] - ring_only[s]) > 1e-6;
  }
  EXPECT_TRUE(differs) << "without a lead, the sunk query should have become a beacon";
}

// Thought revisiting: early "plan" queries (tokens 5-12) attend to a planted
// span (slots 20-24); the rest of the trace attends elsewhere. FPS keeps a
// plan query among the beacons, so BeaconKV keeps the span at a budget where
// recent-only scoring (SnapKV-like, the last R queries, computed here) drops
// it, and a later revisiting query finds its attention mass still cached.
TEST(BeaconPolicy, KeepsASpanThatOnlyOldQueriesAttendTo) {
  constexpr int kN = 120, kH = 2, kD = 8;
  PolicyModelInfo m;
  m.n_layers = 1;
  m.n_heads = kH;
  m.n_kv_heads = 1;
  m.head_dim = kD;
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);  // kAll
  o.recent_queries = 16, o.beacons = 16, o.fps_bound = 64;  // the defaults before issue 45: one FPS shrink
  o.keep_prompt = false;
  o.sinks = 2;
  o.window = 8;
  o.budget = 40;
  ASSERT_TRUE(o.Validate().ok());
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> beta(1.5, 3.0);
  // Directions on slowly rotating RoPE pairs (half layout: pair i = dims i,
  // i + 4): e3 rotates 0.001 rad a token (the plan), e2 0.01 (the work).
  auto dir = [&](int axis, double scale, double noise) {
    Vec v = RandomVec(rng, kD, noise);
    v[axis] += scale;
    return RoundToFloat(v);
  };
  std::vector<std::vector<std::vector<Vec>>> keys(1, std::vector<std::vector<Vec>>(1));
  std::vector<int32_t> positions;
  for (int s = 0; s < kN; ++s) {
    Vec k = s >= 20 && s < 25    ? dir(3, 4.0, 0.2)
            : s >= 30 && s < 112 ? dir(2, beta(rng), 0.2)
                                 : RandomVec(rng, kD, 0.5);
    keys[0][0].push_back(RoundToFloat(RefRope(k, s, 10000.0, false)));
    positions.push_back(s);
  }
  std::unique_ptr<KvPolicy> policy = NewBeaconPolicy(o, m);
  std::vector<std::vector<Vec>> q(kN);  // [token][head]
  for (int t = 0; t < kN; ++t) {
    std::vector<float> row;
    for (int h = 0; h < kH; ++h) {
      q[t].push_back(t < 5 ? RandomVec(rng, kD, 1.0) : t < 13 ? dir(3, 4.0, 0.3) : dir(2, 3.0, 0.3));
      row.insert(row.end(), q[t][h].begin(), q[t][h].end());
    }
    policy->ObserveQuery(0, row.data(), t);
  }
  TestCache tc(KvCacheShape{1, 1, kD, 16}, keys, positions);
  KeysView view(&tc.cache, &tc.seq, 0);
  std::vector<float> scores(kN);
  policy->Score(0, 0, view, kN, scores.data());
  std::vector<int32_t> beacon_keep;
  SelectKeep(scores.data(), view, 0, Protection{0, false, o.sinks, o.window}, o.budget, &beacon_keep);

  Vec recent(kN, 0.0);
  for (int t = kN - o.recent_queries; t < kN; ++t) {
    for (int h = 0; h < kH; ++h) {
      const Vec p = RefAttention(RefRope(q[t][h], t, 10000.0, false), keys[0][0]);
      for (int s = 0; s < kN; ++s) recent[s] = std::max(recent[s], p[s]);
    }
  }
  const std::vector<int32_t> recent_keep = RefSelect(recent, positions, 0, false, o.sinks, o.window, o.budget);

  auto holds = [](const std::vector<int32_t>& keep, int32_t s) {
    return std::binary_search(keep.begin(), keep.end(), s);
  };
  for (int32_t s = 20; s < 25; ++s) {
    EXPECT_TRUE(holds(beacon_keep, s)) << "beacon dropped span slot " << s;
    EXPECT_FALSE(holds(recent_keep, s)) << "recent-only kept span slot " << s << ": the test plants nothing";
  }
  // The revisit: a plan-like query at the next position, over the full cache.
  const Vec revisit = RefAttention(RefRope(dir(3, 4.0, 0.3), kN, 10000.0, false), keys[0][0]);
  double mass_beacon = 0, mass_recent = 0;
  for (int32_t s : beacon_keep) mass_beacon += revisit[s];
  for (int32_t s : recent_keep) mass_recent += revisit[s];
  EXPECT_GT(mass_beacon, 0.9);
  EXPECT_LT(mass_recent, 0.2);
}

// beacon_prompt_queries off (kAll): the prompt's queries never become
// beacons. The prompt (tokens 0-12, as SequenceCompressor::Create is told)
// holds plan queries that attend to a planted span; with the option on,
// FPS keeps one and the span scores high. With it off, the scores are
// exactly those of a policy whose prompt queries were zero vectors (which
// FPS refuses and the 16-query ring has long forgotten): nothing of the
// prompt's queries remains among the beacons, and the span is not kept.
TEST(BeaconPolicy, PromptQueriesOffNeverBecomeBeacons) {
  constexpr int kN = 120, kH = 2, kD = 8, kPrompt = 13;
  PolicyModelInfo m;
  m.n_layers = 1;
  m.n_heads = kH;
  m.n_kv_heads = 1;
  m.head_dim = kD;
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);  // kAll
  o.recent_queries = 16, o.beacons = 16, o.fps_bound = 64;  // the defaults before issue 45: one FPS shrink
  o.keep_prompt = false;
  o.sinks = 2;
  o.window = 8;
  o.budget = 40;
  ASSERT_TRUE(o.Validate().ok());
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> beta(1.5, 3.0);
  auto dir = [&](int axis, double scale, double noise) {
    Vec v = RandomVec(rng, kD, noise);
    v[axis] += scale;
    return RoundToFloat(v);
  };
  std::vector<std::vector<std::vector<Vec>>> keys(1, std::vector<std::vector<Vec>>(1));
  std::vector<int32_t> positions;
  for (int s = 0; s < kN; ++s) {
    Vec k = s >= 20 && s < 25    ? dir(3, 4.0, 0.2)
            : s >= 30 && s < 112 ? dir(2, beta(rng), 0.2)
                                 : RandomVec(rng, kD, 0.5);
    keys[0][0].push_back(RoundToFloat(RefRope(k, s, 10000.0, false)));
    positions.push_back(s);
  }
  std::vector<std::vector<float>> rows(kN);  // [token] -> [n_heads * d]
  for (int t = 0; t < kN; ++t) {
    for (int h = 0; h < kH; ++h) {
      const Vec q = t < 5 ? RandomVec(rng, kD, 1.0) : t < kPrompt ? dir(3, 4.0, 0.3) : dir(2, 3.0, 0.3);
      rows[t].insert(rows[t].end(), q.begin(), q.end());
    }
  }
  TestCache tc(KvCacheShape{1, 1, kD, 16}, keys, positions);
  KeysView view(&tc.cache, &tc.seq, 0);
  // Through the compressor, as the engine builds it: it tells the policy
  // the prompt's length.
  auto scores_of = [&](bool prompt_queries, bool zero_prompt) {
    KvPolicyOptions po = o;
    po.beacon_prompt_queries = prompt_queries;
    absl::StatusOr<std::unique_ptr<SequenceCompressor>> comp = SequenceCompressor::Create(po, m, kPrompt);
    EXPECT_TRUE(comp.ok()) << comp.status();
    const std::vector<float> zeros(kH * kD, 0.0f);
    for (int t = 0; t < kN; ++t) {
      (*comp)->policy()->ObserveQuery(0, zero_prompt && t < kPrompt ? zeros.data() : rows[t].data(), t);
    }
    std::vector<float> scores(kN);
    (*comp)->policy()->Score(0, 0, view, kN, scores.data());
    return scores;
  };
  auto keeps_span = [&](const std::vector<float>& scores) {
    std::vector<int32_t> keep;
    SelectKeep(scores.data(), view, 0, Protection{0, false, o.sinks, o.window}, o.budget, &keep);
    int held = 0;
    for (int32_t s = 20; s < 25; ++s) held += std::binary_search(keep.begin(), keep.end(), s);
    return held;
  };
  const std::vector<float> on = scores_of(true, false);
  const std::vector<float> off = scores_of(false, false);
  const std::vector<float> no_prompt = scores_of(true, true);
  EXPECT_EQ(keeps_span(on), 5) << "with prompt queries the plan query is a beacon: the test plants nothing";
  for (int s = 0; s < kN; ++s) ASSERT_EQ(off[s], no_prompt[s]) << "slot " << s;
  EXPECT_EQ(keeps_span(off), 0);
}

}  // namespace
}  // namespace beacon_policy_test
}  // namespace beacon
