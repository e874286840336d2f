// SequenceCompressor: bound and peak arithmetic, when evictions happen,
// options validation and the factory's errors, and a randomized run of many
// sequences sharing one KvCache under every policy (no block leaks, the peak
// never exceeded, protection kept).
#include "kv/policy/sequence_compressor.h"

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

KvPolicyOptions Options(const std::string& policy, int32_t budget, int32_t interval, bool keep_prompt) {
  KvPolicyOptions o = *KvPolicyOptions::DefaultsForName(policy);
  o.budget = budget;
  o.interval = interval;
  o.keep_prompt = keep_prompt;
  o.sinks = 2;
  o.window = 4;
  return o;
}

TEST(SequenceCompressor, BoundAndPeakSlots) {
  const PolicyModelInfo m = kvtest::SmallModel();
  KvPolicyOptions o = Options("streaming", 100, 16, true);
  auto c = SequenceCompressor::Create(o, m, 50);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->bound(), 150);
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 50, 1000), 166);    // kept prompt + budget + interval
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 50, 10), 60);       // never more than prompt + output
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 50, 100000), 166);  // constant in max_tokens

  o.keep_prompt = false;
  c = SequenceCompressor::Create(o, m, 50);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->bound(), 100);
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 50, 1000), 116);
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 500, 1000), 501);  // a long prompt evicts at its first step
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 500, 0), 500);

  o.policy = KvPolicyKind::kFull;
  EXPECT_EQ(SequenceCompressor::PeakSlots(o, 50, 1000), 1050);
}

// Decodes `steps` tokens into a fresh sequence with `prompt` prompt slots and
// returns the decode steps (1-based) after which an eviction happened.
std::vector<int> EvictionSteps(const KvPolicyOptions& o, int32_t prompt, int steps) {
  const PolicyModelInfo m = kvtest::SmallModel();
  auto c = SequenceCompressor::Create(o, m, prompt);
  EXPECT_TRUE(c.ok()) << c.status();
  kvtest::TestSequence seq(m, 4, 200);
  std::mt19937 rng(1);
  std::vector<int32_t> pos(prompt);
  for (int32_t i = 0; i < prompt; ++i) pos[i] = i;
  seq.Append(pos, rng);
  std::vector<int> at;
  for (int t = 1; t <= steps; ++t) {
    const std::vector<int32_t> one = {prompt + t - 1};
    seq.Append(one, rng);
    const int64_t before = (*c)->evictions();
    (*c)->AfterDecodeStep(&seq.kv(), prompt + t);
    if ((*c)->evictions() != before) {
      at.push_back(t);
      EXPECT_EQ(seq.kv().num_slots(), (*c)->bound()) << "step " << t;
    }
  }
  return at;
}

TEST(SequenceCompressor, EvictsAtTheIntervalOnceAboveTheBound) {
  // keep_prompt: bound 30. The cache first exceeds it at step 21; the
  // interval counts from there, so the first eviction is at step 28 (38
  // slots) and drops 8 slots, as every later one does. (It used to come at
  // step 21 and score the whole cache to drop one slot.)
  EXPECT_EQ(EvictionSteps(Options("streaming", 20, 8, true), 10, 50), (std::vector<int>{28, 36, 44}));
  // Bound 20 from 15 prompt slots: above the bound from step 6 (21 slots),
  // first eviction at bound + interval (28 slots, step 13), then every 8.
  EXPECT_EQ(EvictionSteps(Options("streaming", 20, 8, false), 15, 30), (std::vector<int>{13, 21, 29}));
  // Bound 20 from 25 slots: bound + interval is reached at step 3, before
  // the interval.
  EXPECT_EQ(EvictionSteps(Options("streaming", 20, 8, false), 25, 12), (std::vector<int>{3, 11}));
  // A prompt beyond bound + interval: the first decode step evicts.
  EXPECT_EQ(EvictionSteps(Options("streaming", 20, 8, false), 60, 10), (std::vector<int>{1, 9}));
  // full never evicts.
  EXPECT_TRUE(EvictionSteps(Options("full", 20, 8, false), 25, 40).empty());
}

TEST(SequenceCompressor, ManualEvictResetsTheInterval) {
  const PolicyModelInfo m = kvtest::SmallModel();
  const KvPolicyOptions o = Options("streaming", 20, 8, false);
  auto c = SequenceCompressor::Create(o, m, 0);
  ASSERT_TRUE(c.ok());
  kvtest::TestSequence seq(m, 4, 50);
  std::mt19937 rng(2);
  seq.Append(kvtest::AscendingPositions(26, 1, rng), rng);
  EXPECT_EQ((*c)->Evict(&seq.kv(), 26), 6);
  EXPECT_EQ((*c)->Evict(&seq.kv(), 26), 0);  // at the bound: nothing to do
  EXPECT_EQ((*c)->evictions(), 1);
  EXPECT_EQ((*c)->evicted_slots(), 6);
  for (int t = 0; t < 7; ++t) {
    const std::vector<int32_t> one = {26 + t};
    seq.Append(one, rng);
    (*c)->AfterDecodeStep(&seq.kv(), 27 + t);
  }
  EXPECT_EQ((*c)->evictions(), 1);
  EXPECT_EQ(seq.kv().num_slots(), 27);
}

// A prompt shorter than the sinks, under keep_prompt, with a budget that
// just holds the window: the sinks past the prompt cannot all be protected
// too. The newest window (the current token included) must survive every
// eviction, on every policy; it used to lose its newest slots.
TEST(SequenceCompressor, ShortPromptWithSinksNeverDropsTheWindow) {
  const PolicyModelInfo m = kvtest::SmallModel();
  for (std::string_view name : KvPolicyNames()) {
    if (name == "full") continue;
    KvPolicyOptions o = *KvPolicyOptions::DefaultsForName(std::string(name));
    o.budget = 8;
    o.interval = 4;
    o.keep_prompt = true;
    o.sinks = 4;
    o.window = 8;
    const int32_t prompt = 2;  // bound 10: 4 sinks + 8 window would be 12
    auto c = SequenceCompressor::Create(o, m, prompt);
    ASSERT_TRUE(c.ok()) << c.status();
    kvtest::TestSequence seq(m, 4, 64);
    std::mt19937 rng(3);
    seq.Append(std::vector<int32_t>{0, 1}, rng);
    for (int32_t pos = prompt; pos < 60; ++pos) {
      seq.Append(std::vector<int32_t>{pos}, rng);
      KvPolicy* p = (*c)->policy();
      for (int l = 0; l < m.n_layers; ++l) {
        const std::vector<float> q = kvtest::RandomVector(static_cast<size_t>(m.n_heads) * m.head_dim, rng);
        p->ObserveQuery(l, q.data(), pos);
        if (p->wants_attention()) {
          const int32_t n = seq.kv().num_slots();
          const std::vector<float> probs(static_cast<size_t>(m.group()) * n, 1.0f / n);
          for (int h = 0; h < m.n_kv_heads; ++h) p->ObserveAttention(l, h, probs.data(), m.group(), n);
        }
      }
      const int64_t before = (*c)->evictions();
      (*c)->AfterDecodeStep(&seq.kv(), pos + 1);
      if ((*c)->evictions() == before) continue;
      for (int l = 0; l < m.n_layers; ++l) {
        for (int h = 0; h < m.n_kv_heads; ++h) {
          const std::vector<int32_t> kept = seq.Positions(l, h);
          ASSERT_EQ(kept.size(), 10u);
          EXPECT_EQ(kept[0], 0) << name;  // the prompt
          EXPECT_EQ(kept[1], 1) << name;
          for (int i = 0; i < o.window; ++i) {
            EXPECT_EQ(kept[kept.size() - 1 - i], pos - i) << name << " layer " << l << " head " << h;
          }
        }
      }
    }
    EXPECT_GT((*c)->evictions(), 5) << name;
  }
}

// A device whose eviction fails: the compressor evicts nothing and reports
// the failure, which stays (the sequence's owner ends it).
class FailingDevice : public KvDeviceStorage {
 public:
  absl::Status Evict(SequenceKv*, KvPolicy*, const KvPolicyOptions&, const Protection&, int32_t, int32_t) override {
    ++calls;
    return absl::InternalError("cudaErrorIllegalAddress");
  }
  int calls = 0;
};

TEST(SequenceCompressor, AFailedDeviceEvictionIsReportedNotDropped) {
  const PolicyModelInfo m = kvtest::SmallModel();
  KvCache cache(KvCacheShape{m.n_layers, m.n_kv_heads, m.head_dim, 4}, 32, KvStorage::kDevice);
  auto device = std::make_unique<FailingDevice>();
  FailingDevice* dev = device.get();
  cache.set_device_storage(std::move(device));
  auto c = SequenceCompressor::Create(Options("streaming", 20, 8, false), m, 0);
  ASSERT_TRUE(c.ok());
  SequenceKv kv(&cache);
  ASSERT_TRUE(kv.Reserve(30).ok());
  kv.CommitSlots(30);
  EXPECT_TRUE((*c)->failure().ok());
  EXPECT_EQ((*c)->Evict(&kv, 30), 0);
  EXPECT_EQ(kv.num_slots(), 30);
  EXPECT_EQ((*c)->failure().code(), absl::StatusCode::kInternal);
  EXPECT_THAT((*c)->failure().message(), HasSubstr("KV eviction on the device failed: cudaErrorIllegalAddress"));
  EXPECT_EQ((*c)->Evict(&kv, 30), 0);
  EXPECT_EQ(dev->calls, 1);  // not retried
  EXPECT_EQ((*c)->evictions(), 0);
}

TEST(KvPolicyOptions, ValidateNamesTheField) {
  struct Case {
    const char* field;
    void (*mutate)(KvPolicyOptions&);
  };
  const Case cases[] = {
      {"kv_budget", [](KvPolicyOptions& o) { o.budget = 0; }},
      {"kv_interval", [](KvPolicyOptions& o) { o.interval = 0; }},
      {"kv_sinks", [](KvPolicyOptions& o) { o.sinks = -1; }},
      {"kv_window", [](KvPolicyOptions& o) { o.window = -1; }},
      {"kv_budget", [](KvPolicyOptions& o) { o.keep_prompt = false, o.budget = 30, o.sinks = 4, o.window = 30; }},
      {"kv_budget", [](KvPolicyOptions& o) { o.budget = 10, o.window = 11; }},
      {"kv_recent_queries", [](KvPolicyOptions& o) { o.recent_queries = 0; }},
      {"kv_recent_queries", [](KvPolicyOptions& o) { o.recent_queries = 1025; }},
      {"kv_beacons", [](KvPolicyOptions& o) { o.beacons = 0; }},
      {"kv_fps_bound", [](KvPolicyOptions& o) { o.fps_bound = o.beacons; }},
      {"kv_global_threshold", [](KvPolicyOptions& o) { o.global_threshold = 1.5f; }},
      {"kv_pool_kernel", [](KvPolicyOptions& o) { o.pool_kernel = 4; }},
      {"kv_pool_kernel", [](KvPolicyOptions& o) { o.pool_kernel = 0; }},
      {"kv_lambda", [](KvPolicyOptions& o) { o.lambda = -0.1f; }},
  };
  EXPECT_TRUE(KvPolicyOptions().Validate().ok());
  for (std::string_view name : KvPolicyNames())
    EXPECT_TRUE(KvPolicyOptions::DefaultsForName(name)->Validate().ok()) << name;
  for (const Case& c : cases) {
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
    c.mutate(o);
    const absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(s.message()), StartsWith(std::string(c.field) + ":")) << s;
  }
}

TEST(KvPolicyOptions, PublishedDefaults) {
  const KvPolicyOptions snap = KvPolicyOptions::DefaultsFor(KvPolicyKind::kSnapKv);
  EXPECT_EQ(snap.recent_queries, 32);
  EXPECT_EQ(snap.pool_kernel, 7);
  const KvPolicyOptions rkv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kRkv);
  EXPECT_EQ(rkv.recent_queries, 8);
  EXPECT_EQ(rkv.pool_kernel, 7);
  EXPECT_FLOAT_EQ(rkv.lambda, 0.1f);
  // BeaconKV's R, K, U: issue 45's confirmed ablation winner (16, 16, 64 before).
  const KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  EXPECT_EQ(beacon.recent_queries, 4);
  EXPECT_EQ(beacon.beacons, 8);
  EXPECT_EQ(beacon.fps_bound, 16);
  // The FPS buffer holds the decoding history (docs/fidelity.md "Prompt
  // queries as beacons").
  EXPECT_FALSE(KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon).beacon_prompt_queries);
}

TEST(CreateKvPolicy, UnknownNameListsTheKnownOnes) {
  // A name is parsed once, where options are resolved: an unknown one never
  // becomes options, so neither CreateKvPolicy nor a compressor can see it.
  const absl::Status s = KvPolicyOptions::DefaultsForName("snapk").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'snapk'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("full, streaming, h2o, snapkv, rkv, random, beacon"));
  EXPECT_EQ(ParseKvPolicy("snapk").status().code(), absl::StatusCode::kInvalidArgument);
  for (std::string_view name : KvPolicyNames()) {
    auto p = CreateKvPolicy(*KvPolicyOptions::DefaultsForName(name), kvtest::SmallModel());
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ((*p)->name(), name);
  }
}

// ---- randomized: many sequences, one cache --------------------------------------

struct LiveSequence {
  std::unique_ptr<SequenceCompressor> compressor;
  std::optional<SequenceKv> kv;
  int32_t prompt = 0;
  int32_t generated = 0;
  int32_t max_tokens = 0;
  int32_t next_position = 0;
};

TEST(SequenceCompressor, RandomizedSharedCacheNeverLeaksOrExceedsThePeak) {
  const PolicyModelInfo m = kvtest::SmallModel();
  const int bs = 4;
  const int32_t total_blocks = 160;
  KvCache cache(KvCacheShape{m.n_layers, m.n_kv_heads, m.head_dim, bs}, total_blocks);
  std::mt19937 rng(2024);
  std::vector<LiveSequence> seqs(6);
  const std::span<const std::string_view> names = KvPolicyNames();
  int64_t evictions = 0, finished = 0, aborted = 0, rejected = 0;

  auto write_slot = [&](SequenceKv& kv, int32_t slot, int32_t position) {
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h) {
        const int32_t b = kv.block_ids()[slot / bs];
        for (int c = 0; c < m.head_dim; ++c)
          cache.K(l, b, h)[(slot % bs) * m.head_dim + c] = std::normal_distribution<float>()(rng);
        cache.Positions(l, b, h)[slot % bs] = position;
      }
    }
  };
  auto observe_token = [&](LiveSequence& s, int32_t position, bool decode) {
    KvPolicy* p = s.compressor->policy();
    for (int l = 0; l < m.n_layers; ++l) {
      const std::vector<float> q = kvtest::RandomVector(static_cast<size_t>(m.n_heads) * m.head_dim, rng);
      p->ObserveQuery(l, q.data(), position);
      if (decode && p->wants_attention()) {
        const int32_t n = s.kv->num_slots();
        const std::vector<float> probs(static_cast<size_t>(m.group()) * n, 1.0f / n);
        for (int h = 0; h < m.n_kv_heads; ++h) p->ObserveAttention(l, h, probs.data(), m.group(), n);
      }
    }
  };
  auto start = [&](LiveSequence& s) {
    KvPolicyOptions o = *KvPolicyOptions::DefaultsForName(names[rng() % names.size()]);
    o.budget = 8 + static_cast<int32_t>(rng() % 24);
    o.interval = 1 + static_cast<int32_t>(rng() % 10);
    o.keep_prompt = rng() % 2;
    o.sinks = static_cast<int32_t>(rng() % 4);
    o.window = static_cast<int32_t>(rng() % (o.budget - o.sinks + 1));
    o.seed = rng();
    s.prompt = 1 + static_cast<int32_t>(rng() % 40);
    s.max_tokens = 1 + static_cast<int32_t>(rng() % 120);
    auto c = SequenceCompressor::Create(o, m, s.prompt);
    ASSERT_TRUE(c.ok()) << c.status();
    s.compressor = std::move(*c);
    s.kv.emplace(&cache);
    if (!s.kv->Reserve(s.prompt).ok()) {  // admission failed: nothing held
      ++rejected;
      s.kv.reset();
      return;
    }
    for (int32_t t = 0; t < s.prompt; ++t) write_slot(*s.kv, t, t);
    s.kv->CommitSlots(s.prompt);
    for (int32_t t = 0; t < s.prompt; ++t) observe_token(s, t, false);
    s.generated = 0;
    s.next_position = s.prompt;
  };
  auto stop = [&](LiveSequence& s) {
    s.kv->Release();
    s.kv.reset();
  };
  auto decode = [&](LiveSequence& s) {
    const int32_t n = s.kv->num_slots();
    if (!s.kv->Reserve(n + 1).ok()) {  // out of blocks: preempt (abort) it
      ++aborted;
      stop(s);
      return;
    }
    write_slot(*s.kv, n, s.next_position);
    s.kv->CommitSlots(n + 1);
    ++s.generated;
    observe_token(s, s.next_position, true);
    ++s.next_position;
    const int64_t peak = SequenceCompressor::PeakSlots(s.compressor->options(), s.prompt, s.generated);
    ASSERT_LE(s.kv->num_slots(), peak);
    const int64_t before = s.compressor->evictions();
    s.compressor->AfterDecodeStep(&*s.kv, s.next_position);
    evictions += s.compressor->evictions() - before;
    ASSERT_LE(s.kv->num_slots(), peak);
    if (s.compressor->evictions() != before) {
      ASSERT_EQ(s.kv->num_slots(), s.compressor->bound());
      // Protection survived in every (layer, head), in token order: every
      // position below the sinks (and the prompt, when kept) that exists,
      // and the newest token when there is a window. Validated options make
      // all protected slots fit in the bound.
      const KvPolicyOptions& o = s.compressor->options();
      const int32_t head = std::min(o.keep_prompt ? std::max(s.prompt, o.sinks) : o.sinks, s.next_position);
      for (int l = 0; l < m.n_layers; ++l) {
        const KeysView keys(&cache, &*s.kv, l);
        for (int h = 0; h < m.n_kv_heads; ++h) {
          for (int32_t slot = 0; slot < head; ++slot) {
            ASSERT_EQ(keys.position(h, slot), slot) << o.policy_name();
          }
          for (int32_t slot = 1; slot < keys.n_slots(); ++slot) {
            ASSERT_LT(keys.position(h, slot - 1), keys.position(h, slot)) << "order preserved";
          }
          if (o.window > 0) {
            ASSERT_EQ(keys.position(h, keys.n_slots() - 1), s.next_position - 1) << o.policy_name();
          }
        }
      }
    }
    if (s.generated >= s.max_tokens) {
      ++finished;
      stop(s);
    }
  };

  for (int op = 0; op < 6000; ++op) {
    LiveSequence& s = seqs[rng() % seqs.size()];
    if (!s.kv.has_value()) {
      start(s);
    } else if (rng() % 40 == 0) {
      ++aborted;
      stop(s);
    } else {
      decode(s);
    }
    if (::testing::Test::HasFatalFailure()) return;
    int32_t held = 0;
    for (const LiveSequence& q : seqs) {
      if (!q.kv.has_value()) continue;
      held += q.kv->num_blocks();
      ASSERT_LT(q.kv->capacity() - q.kv->num_slots(), bs) << "no idle tail block";
    }
    ASSERT_EQ(held, cache.pool().num_used()) << "op " << op;
  }
  for (LiveSequence& s : seqs) {
    if (s.kv.has_value()) stop(s);
  }
  EXPECT_EQ(cache.pool().num_free(), total_blocks);
  // The run exercised what it claims to.
  EXPECT_GT(evictions, 100);
  EXPECT_GT(finished, 20);
  EXPECT_GT(aborted, 20);
}

}  // namespace
}  // namespace beacon
