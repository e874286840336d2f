// The streaming, random and h2o policies through SequenceCompressor: the exact
// kept set of every (layer, KV head) equals a naive reference (own scores,
// own protection + top-k by full sort).
#include <algorithm>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/sequence_compressor.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

using kvtest::NaiveKeep;
using kvtest::NaiveProtection;

// A prompt at positions [0, prompt), then generated tokens with gaps (the
// positions of a sequence after earlier evictions).
std::vector<int32_t> SequencePositions(int32_t prompt, int32_t n, int max_gap, std::mt19937& rng) {
  std::vector<int32_t> p(n);
  for (int32_t i = 0; i < n; ++i) p[i] = i < prompt ? i : p[i - 1] + 1 + static_cast<int32_t>(rng() % max_gap);
  return p;
}

// H2O splits its budget evenly between the recent window and the heavy
// hitters (its paper's 50%/50%); the others protect the operator's window.
NaiveProtection ProtectionOf(const KvPolicyOptions& o, int32_t prompt) {
  const int32_t window = o.policy == KvPolicyKind::kH2o ? std::max(o.window, o.budget / 2) : o.window;
  return NaiveProtection{prompt, o.keep_prompt, o.sinks, window};
}

std::unique_ptr<SequenceCompressor> MakeCompressor(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t prompt) {
  auto c = SequenceCompressor::Create(o, m, prompt);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// ---- streaming ----------------------------------------------------------------

TEST(StreamingPolicy, KeepsPromptOrSinksPlusTheMostRecent) {
  const PolicyModelInfo m = kvtest::SmallModel();
  for (bool keep_prompt : {true, false}) {
    std::mt19937 rng(21);
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kStreaming);
    o.budget = 20;
    o.sinks = 4;
    o.window = 8;
    o.keep_prompt = keep_prompt;
    const int32_t prompt = 10, n = 61;
    auto comp = MakeCompressor(o, m, prompt);
    ASSERT_NE(comp, nullptr);
    kvtest::TestSequence seq(m, 4, 40);
    const std::vector<int32_t> pos = SequencePositions(prompt, n, 3, rng);
    seq.Append(pos, rng);

    // By hand: the protected head (prompt, or the sinks) + the latest slots.
    std::vector<int32_t> want;
    const int32_t head = keep_prompt ? prompt : o.sinks;
    const int32_t bound = comp->bound();
    EXPECT_EQ(bound, keep_prompt ? prompt + o.budget : o.budget);
    for (int32_t s = 0; s < head; ++s) want.push_back(pos[s]);
    for (int32_t s = n - (bound - head); s < n; ++s) want.push_back(pos[s]);

    // And by the naive rule over slot-index scores.
    std::vector<double> scores(n);
    for (int32_t s = 0; s < n; ++s) scores[s] = s;
    EXPECT_EQ(kvtest::Gather(pos, NaiveKeep(scores, pos, ProtectionOf(o, prompt), bound)), want);

    EXPECT_EQ(comp->Evict(&seq.kv(), pos.back() + 1), n - bound);
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h) EXPECT_EQ(seq.Positions(l, h), want) << "keep_prompt " << keep_prompt;
    }
    EXPECT_EQ(seq.kv().num_blocks(), (bound + 3) / 4);
  }
}

// ---- random -------------------------------------------------------------------

struct RandomRun {
  std::vector<std::vector<std::vector<int32_t>>> kept;  // [layer][head] positions
  std::vector<float> first_scores;                      // Score(0, 0) before the eviction
};

RandomRun RunRandom(uint64_t seed, bool keep_prompt) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(31);  // same sequence for every seed
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kRandom);
  o.seed = seed;
  o.budget = 24;
  o.sinks = 2;
  o.window = 6;
  o.keep_prompt = keep_prompt;
  const int32_t prompt = 8, n = 70;
  auto comp = SequenceCompressor::Create(o, m, prompt);
  EXPECT_TRUE(comp.ok());
  kvtest::TestSequence seq(m, 4, 40);
  const std::vector<int32_t> pos = SequencePositions(prompt, n, 2, rng);
  seq.Append(pos, rng);

  RandomRun run;
  run.kept.resize(m.n_layers);
  std::vector<std::vector<std::vector<int32_t>>> want(m.n_layers);
  for (int l = 0; l < m.n_layers; ++l) {
    for (int h = 0; h < m.n_kv_heads; ++h) {
      std::vector<float> s(n);
      (*comp)->policy()->Score(l, h, seq.keys(l), pos.back() + 1, s.data());
      if (l == 0 && h == 0) run.first_scores = s;
      for (float v : s) {
        EXPECT_GE(v, 0.0f);
        EXPECT_LT(v, 1.0f);
      }
      want[l].push_back(kvtest::Gather(
          pos, NaiveKeep(std::vector<double>(s.begin(), s.end()), pos, ProtectionOf(o, prompt), (*comp)->bound())));
    }
  }
  (*comp)->Evict(&seq.kv(), pos.back() + 1);
  for (int l = 0; l < m.n_layers; ++l) {
    for (int h = 0; h < m.n_kv_heads; ++h) {
      run.kept[l].push_back(seq.Positions(l, h));
      EXPECT_EQ(run.kept[l][h], want[l][h]) << "l" << l << " h" << h;
    }
  }
  // A second eviction draws fresh scores for the same slot indices.
  std::vector<float> again(seq.kv().num_slots());
  (*comp)->policy()->Score(0, 0, seq.keys(0), pos.back() + 1, again.data());
  EXPECT_NE(std::vector<float>(run.first_scores.begin(), run.first_scores.begin() + again.size()), again);
  return run;
}

TEST(RandomPolicy, SeededDeterministicPerHeadAndProtected) {
  for (bool keep_prompt : {true, false}) {
    const RandomRun a = RunRandom(7, keep_prompt), b = RunRandom(7, keep_prompt), c = RunRandom(8, keep_prompt);
    EXPECT_EQ(a.kept, b.kept);
    EXPECT_EQ(a.first_scores, b.first_scores);
    EXPECT_NE(a.kept, c.kept);
    EXPECT_NE(a.kept[0][0], a.kept[0][1]);  // heads choose independently
    EXPECT_NE(a.kept[0][0], a.kept[1][0]);  // and layers
    // Roughly uniform: the mean of 70 U(0,1) draws is within 0.5 +- 0.15.
    double mean = 0;
    for (float v : a.first_scores) mean += v / a.first_scores.size();
    EXPECT_NEAR(mean, 0.5, 0.15);
  }
}

// ---- h2o ----------------------------------------------------------------------

// One decode step's attention of a group, [group][n], rows summing to 1.
std::vector<float> RandomProbs(int group, int32_t n, std::mt19937& rng) {
  std::vector<float> p = kvtest::RandomVector(static_cast<size_t>(group) * n, rng, 2.0f);
  for (int h = 0; h < group; ++h) {
    double total = 0;
    for (int32_t s = 0; s < n; ++s) total += p[h * n + s] = std::exp(p[h * n + s]);
    for (int32_t s = 0; s < n; ++s) p[h * n + s] = static_cast<float>(p[h * n + s] / total);
  }
  return p;
}

TEST(H2oPolicy, AccumulatesAttentionAndRemapsThroughEvictions) {
  const PolicyModelInfo m = kvtest::SmallModel();
  const int group = m.group();
  std::mt19937 rng(41);
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kH2o);
  o.budget = 20;
  o.sinks = 2;
  o.window = 4;
  o.interval = 1000;  // evictions only when the test asks
  const int32_t prompt = 9;
  auto comp = MakeCompressor(o, m, prompt);
  ASSERT_NE(comp, nullptr);
  ASSERT_TRUE(comp->policy()->wants_attention());
  kvtest::TestSequence seq(m, 4, 40);
  std::vector<int32_t> prompt_pos(prompt);
  for (int32_t i = 0; i < prompt; ++i) prompt_pos[i] = i;
  seq.Append(prompt_pos, rng);

  // The reference: accumulated mass by token position, per (layer, head).
  std::vector<std::vector<std::map<int32_t, double>>> mass(m.n_layers,
                                                           std::vector<std::map<int32_t, double>>(m.n_kv_heads));
  int32_t next = prompt;
  auto decode = [&](int steps) {
    for (int t = 0; t < steps; ++t) {
      const std::vector<int32_t> one = {next++};
      seq.Append(one, rng);
      const int32_t n = seq.kv().num_slots();
      for (int l = 0; l < m.n_layers; ++l) {
        for (int h = 0; h < m.n_kv_heads; ++h) {
          const std::vector<float> p = RandomProbs(group, n, rng);
          comp->policy()->ObserveAttention(l, h, p.data(), group, n);
          const std::vector<int32_t> pos = seq.Positions(l, h);
          for (int g = 0; g < group; ++g) {
            for (int32_t s = 0; s < n; ++s) mass[l][h][pos[s]] += p[g * n + s];
          }
        }
      }
    }
  };
  auto evict_and_check = [&](const char* when) {
    std::vector<std::vector<std::vector<int32_t>>> want(m.n_layers);
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h) {
        const std::vector<int32_t> pos = seq.Positions(l, h);
        std::vector<double> scores(pos.size());
        for (size_t s = 0; s < pos.size(); ++s) scores[s] = mass[l][h][pos[s]];
        // The policy's own scores agree before the selection does.
        std::vector<float> got(pos.size());
        comp->policy()->Score(l, h, seq.keys(l), next, got.data());
        for (size_t s = 0; s < pos.size(); ++s)
          ASSERT_NEAR(got[s], scores[s], 1e-5 * (1 + scores[s])) << when << " slot " << s;
        want[l].push_back(kvtest::Gather(pos, NaiveKeep(scores, pos, ProtectionOf(o, prompt), comp->bound())));
      }
    }
    ASSERT_GT(comp->Evict(&seq.kv(), next), 0) << when;
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h)
        EXPECT_EQ(seq.Positions(l, h), want[l][h]) << when << " l" << l << " h" << h;
    }
  };

  decode(40);
  evict_and_check("first eviction");
  // Heads now hold different tokens; accumulators must have followed them.
  EXPECT_NE(seq.Positions(0, 0), seq.Positions(0, 1));
  // Recent and heavy split the budget 1:1: the newest budget / 2 = 10 tokens
  // are kept in every head, not only the operator's window of 4.
  for (int h = 0; h < m.n_kv_heads; ++h) {
    const std::vector<int32_t> kept = seq.Positions(0, h);
    for (int32_t p = next - 10; p < next; ++p)
      EXPECT_TRUE(std::count(kept.begin(), kept.end(), p)) << "h" << h << " p" << p;
  }
  decode(25);
  evict_and_check("second eviction");
  decode(13);
  evict_and_check("third eviction");
}

TEST(H2oPolicy, ConcurrentObserveOfDifferentHeads) {
  PolicyModelInfo m = kvtest::SmallModel();
  m.n_heads = 8;
  m.n_kv_heads = 4;
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kH2o);
  auto policy = CreateKvPolicy(o, m);
  ASSERT_TRUE(policy.ok());
  const int group = m.group();
  constexpr int kSteps = 300;
  // Head h receives probability (h + 1) / 100 on every slot of every step.
  std::vector<std::thread> threads;
  for (int h = 0; h < m.n_kv_heads; ++h) {
    threads.emplace_back([&, h] {
      for (int32_t n = 1; n <= kSteps; ++n) {
        const std::vector<float> p(static_cast<size_t>(group) * n, (h + 1) / 100.0f);
        (*policy)->ObserveAttention(1, h, p.data(), group, n);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::mt19937 rng(1);
  kvtest::TestSequence seq(m, 4, 100);
  seq.Append(kvtest::AscendingPositions(kSteps, 1, rng), rng);
  std::vector<float> got(kSteps);
  for (int h = 0; h < m.n_kv_heads; ++h) {
    (*policy)->Score(1, h, seq.keys(1), kSteps, got.data());
    // Slot s was present for steps s + 1 .. kSteps.
    for (int32_t s = 0; s < kSteps; ++s) ASSERT_NEAR(got[s], group * (h + 1) / 100.0 * (kSteps - s), 1e-3) << h;
  }
  // Layer 0 was never observed: all zero.
  (*policy)->Score(0, 0, seq.keys(0), kSteps, got.data());
  EXPECT_EQ(*std::max_element(got.begin(), got.end()), 0.0f);
}

}  // namespace
}  // namespace beacon
