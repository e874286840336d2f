// snapkv and rkv (the policies that score with a ring of recent queries)
// against naive references written here from the papers' reference code:
// own RoPE, own causal softmax, own pooling, own redundancy; then the exact
// kept set of SequenceCompressor::Evict against protection + top-k by sort.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/sequence_compressor.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

using kvtest::NaiveDot;
using kvtest::NaiveMaxPool;
using kvtest::NaiveRope;
using kvtest::NaiveSoftmax;

struct Query {
  std::vector<float> q;  // [n_heads][head_dim], pre-RoPE
  int32_t position;
};

// SnapKV's protected window: its observation window (Algorithm 1 keeps the
// window's KV), at least the operator's window and at most the budget.
int32_t SnapKvWindow(const KvPolicyOptions& o) {
  return std::min(std::max(o.window, o.recent_queries), std::max(o.window, o.budget - (o.keep_prompt ? 0 : o.sinks)));
}

// SnapKV: per query head, the mean over the window's queries that see a slot
// of their causal softmax over all slots (the paper's sum / R where every
// query sees every scored slot); max-pooled over the slots before the
// protected window; averaged over the GQA group.
std::vector<double> NaiveSnapKv(const PolicyModelInfo& m, const KvPolicyOptions& o, const std::vector<Query>& window_q,
                                const kvtest::TestSequence& seq, int layer, int g) {
  const KeysView keys = seq.keys(layer);
  const int32_t n = keys.n_slots();
  const int d = m.head_dim, group = m.group();
  const int32_t past = std::max(0, n - SnapKvWindow(o));
  std::vector<double> score(n, 0.0);
  for (int i = 0; i < group; ++i) {
    const int h = g * group + i;
    std::vector<double> sum(n, 0.0), voters(n, 0.0);
    for (const Query& q : window_q) {
      const std::vector<double> rq = NaiveRope(&q.q[h * d], d, q.position, m.rope_theta, m.rope_interleaved);
      std::vector<double> logits(n);
      std::vector<bool> visible(n);
      for (int32_t s = 0; s < n; ++s) {
        logits[s] = NaiveDot(rq, keys.key(g, s)) / std::sqrt(static_cast<double>(d));
        visible[s] = keys.position(g, s) <= q.position;
      }
      const std::vector<double> p = NaiveSoftmax(logits, visible);
      for (int32_t s = 0; s < n; ++s) {
        sum[s] += p[s];
        voters[s] += visible[s];
      }
    }
    for (int32_t s = 0; s < n; ++s) sum[s] /= std::max(1.0, voters[s]);
    const std::vector<double> pooled =
        NaiveMaxPool(std::vector<double>(sum.begin(), sum.begin() + past), o.pool_kernel);
    std::copy(pooled.begin(), pooled.end(), sum.begin());
    for (int32_t s = 0; s < n; ++s) score[s] += sum[s] / group;
  }
  return score;
}

// R-KV: lambda * pooled mean attention of the window's queries over the past
// slots (group max of logits, causal) - (1 - lambda) * softmax of the column
// means of the key cosine matrix with each row's last > 0.5 entry exempted.
std::vector<double> NaiveRkv(const PolicyModelInfo& m, const KvPolicyOptions& o, const std::vector<Query>& window_q,
                             const kvtest::TestSequence& seq, int layer, int g) {
  const KeysView keys = seq.keys(layer);
  const int32_t n = keys.n_slots();
  const int d = m.head_dim, group = m.group();
  const int32_t past = std::max(0, n - o.window);
  std::vector<double> imp(n, 0.0);
  for (const Query& q : window_q) {
    std::vector<std::vector<double>> rq;
    for (int i = 0; i < group; ++i) {
      rq.push_back(NaiveRope(&q.q[(g * group + i) * d], d, q.position, m.rope_theta, m.rope_interleaved));
    }
    std::vector<double> logits(past, -1e300);
    std::vector<bool> visible(past);
    for (int32_t s = 0; s < past; ++s) {
      for (int i = 0; i < group; ++i)
        logits[s] = std::max(logits[s], NaiveDot(rq[i], keys.key(g, s)) / std::sqrt(double(d)));
      visible[s] = keys.position(g, s) <= q.position;
    }
    if (std::find(visible.begin(), visible.end(), true) == visible.end()) continue;
    const std::vector<double> p = NaiveSoftmax(logits, visible);
    for (int32_t s = 0; s < past; ++s) imp[s] += p[s] / window_q.size();
  }
  const std::vector<double> pooled = NaiveMaxPool(std::vector<double>(imp.begin(), imp.begin() + past), o.pool_kernel);
  std::copy(pooled.begin(), pooled.end(), imp.begin());

  std::vector<std::vector<double>> u(n, std::vector<double>(d));
  for (int32_t s = 0; s < n; ++s) {
    const float* k = keys.key(g, s);
    double norm = 0;
    for (int c = 0; c < d; ++c) norm += double(k[c]) * k[c];
    for (int c = 0; c < d; ++c) u[s][c] = k[c] / (std::sqrt(norm) + 1e-8);
  }
  std::vector<double> col(n, 0.0);
  for (int32_t i = 0; i < n; ++i) {
    std::vector<double> c(n, 0.0);
    int32_t last = 0;
    for (int32_t j = 0; j < n; ++j) {
      if (j != i) {
        for (int t = 0; t < d; ++t) c[j] += u[i][t] * u[j][t];
      }
      if (c[j] > 0.5) last = j;
    }
    c[last] = 0.0;
    for (int32_t j = 0; j < n; ++j) col[j] += c[j];
  }
  for (double& v : col) v /= n;
  const std::vector<double> red = NaiveSoftmax(col);
  std::vector<double> score(n);
  for (int32_t s = 0; s < n; ++s) score[s] = o.lambda * imp[s] - (1.0 - o.lambda) * red[s];
  return score;
}

// (policy, interleaved RoPE, lambda, SnapKV's observation window R)
class QueryPolicyTest : public ::testing::TestWithParam<std::tuple<std::string, bool, float, int>> {};

TEST_P(QueryPolicyTest, ScoresAndKeptSetMatchNaiveReference) {
  const auto& [name, interleaved, lambda, snap_r] = GetParam();
  const PolicyModelInfo m = kvtest::SmallModel(interleaved);
  std::mt19937 rng(name == "rkv" ? 51 : 52);
  KvPolicyOptions o = *KvPolicyOptions::DefaultsForName(name);
  o.lambda = lambda;
  o.budget = 24;
  o.sinks = 2;
  o.window = 5;  // fewer than the window queries: the causal mask matters
  // SnapKV protects its observation window: R = 9 of a budget of 24 (every
  // scored slot seen by every window query), or R = 30 past the budget (the
  // window is the budget, and the 6 newest scored slots have fewer voters).
  if (name == "snapkv") o.recent_queries = snap_r;
  const int32_t prompt = 8, n = 72;
  auto comp = SequenceCompressor::Create(o, m, prompt);
  ASSERT_TRUE(comp.ok()) << comp.status();
  KvPolicy* policy = (*comp)->policy();

  kvtest::TestSequence seq(m, 4, 40);
  std::vector<int32_t> pos(n);
  for (int32_t i = 0; i < n; ++i) pos[i] = i < prompt ? i : pos[i - 1] + 1 + static_cast<int32_t>(rng() % 3);
  seq.Append(pos, rng);
  // Near-duplicate keys (what R-KV's redundancy is about): slot b copies slot
  // a plus a little noise, in every (layer, head).
  for (auto [a, b] : std::vector<std::pair<int, int>>{{10, 11}, {10, 30}, {20, 41}, {33, 34}, {33, 50}, {33, 60}}) {
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h) {
        const std::vector<float> noise = kvtest::RandomVector(m.head_dim, rng, 0.05f);
        for (int c = 0; c < m.head_dim; ++c) seq.MutableKey(l, h, b)[c] = seq.MutableKey(l, h, a)[c] + noise[c];
      }
    }
  }
  // Every token's query is observed, every layer; the ring keeps the last R.
  std::vector<std::vector<Query>> queries(m.n_layers);
  for (int32_t t = 0; t < n; ++t) {
    for (int l = 0; l < m.n_layers; ++l) {
      Query q{kvtest::RandomVector(static_cast<size_t>(m.n_heads) * m.head_dim, rng, 1.5f), pos[t]};
      policy->ObserveQuery(l, q.q.data(), q.position);
      queries[l].push_back(std::move(q));
    }
  }

  const int32_t next = pos.back() + 1;
  const kvtest::NaiveProtection prot{prompt, o.keep_prompt, o.sinks, name == "snapkv" ? SnapKvWindow(o) : o.window};
  std::vector<std::vector<std::vector<int32_t>>> want(m.n_layers);
  for (int l = 0; l < m.n_layers; ++l) {
    const std::vector<Query> window_q(queries[l].end() - o.recent_queries, queries[l].end());
    for (int g = 0; g < m.n_kv_heads; ++g) {
      const std::vector<double> ref =
          name == "snapkv" ? NaiveSnapKv(m, o, window_q, seq, l, g) : NaiveRkv(m, o, window_q, seq, l, g);
      std::vector<float> got(n);
      policy->Score(l, g, seq.keys(l), next, got.data());
      for (int32_t s = 0; s < n; ++s)
        ASSERT_NEAR(got[s], ref[s], 1e-6 + 1e-4 * std::abs(ref[s])) << "l" << l << " g" << g << " s" << s;
      want[l].push_back(kvtest::Gather(pos, kvtest::NaiveKeep(ref, pos, prot, (*comp)->bound())));
    }
  }
  ASSERT_EQ((*comp)->Evict(&seq.kv(), next), n - (*comp)->bound());
  for (int l = 0; l < m.n_layers; ++l) {
    for (int g = 0; g < m.n_kv_heads; ++g) EXPECT_EQ(seq.Positions(l, g), want[l][g]) << "l" << l << " g" << g;
  }
  // The kept sets are not trivially the streaming set: scores chose (unless
  // SnapKV's observation window takes the whole budget, as at R = 30).
  std::vector<int32_t> recent(pos.begin(), pos.begin() + prompt);
  recent.insert(recent.end(), pos.end() - o.budget, pos.end());
  if (name != "snapkv" || SnapKvWindow(o) < o.budget) {
    EXPECT_NE(seq.Positions(0, 0), recent);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, QueryPolicyTest,
    ::testing::Values(std::make_tuple("snapkv", false, 0.1f, 9), std::make_tuple("snapkv", true, 0.1f, 9),
                      std::make_tuple("snapkv", false, 0.1f, 30), std::make_tuple("rkv", false, 0.1f, 0),
                      std::make_tuple("rkv", true, 0.1f, 0), std::make_tuple("rkv", false, 0.0f, 0),
                      std::make_tuple("rkv", false, 1.0f, 0)),
    [](const ::testing::TestParamInfo<QueryPolicyTest::ParamType>& i) {
      const std::string lambda = std::to_string(static_cast<int>(std::get<2>(i.param) * 100));
      return std::get<0>(i.param) + (std::get<1>(i.param) ? "_interleaved" : "_neox") +
             (std::get<0>(i.param) == "rkv" ? "_lambda_pct" + lambda : "_r" + std::to_string(std::get<3>(i.param)));
    });

// R-KV's redundancy term alone (lambda 0): of a cluster of identical keys,
// the most recent copy is the one the others' exemptions favour, so the
// earlier copies are evicted first.
TEST(RkvPolicy, RedundancyEvictsEarlierDuplicates) {
  PolicyModelInfo m = kvtest::SmallModel();
  m.n_layers = 1;
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kRkv);
  o.lambda = 0.0f;
  o.window = 0;
  o.sinks = 0;
  o.keep_prompt = false;
  o.budget = 8;
  auto policy = CreateKvPolicy(o, m);
  ASSERT_TRUE(policy.ok());
  // 12 slots: 8 mutually orthogonal-ish keys (+-e_c) and copies of e_0 at
  // slots 8..11 (so slot 0 and 8..11 are five identical keys).
  kvtest::TestSequence seq(m, 4, 8);
  std::mt19937 rng(3);
  std::vector<int32_t> pos(12);
  for (int i = 0; i < 12; ++i) pos[i] = i;
  seq.Append(pos, rng);
  for (int h = 0; h < m.n_kv_heads; ++h) {
    for (int s = 0; s < 12; ++s) {
      float* k = seq.MutableKey(0, h, s);
      std::fill(k, k + m.head_dim, 0.0f);
      k[s < 8 ? s : 0] = s < 8 && s % 2 ? -1.0f : 1.0f;
    }
  }
  std::vector<float> scores(12);
  (*policy)->Score(0, 0, seq.keys(0), 12, scores.data());
  // Distinct keys: no similarity, the lowest redundancy.
  for (int s = 1; s < 8; ++s) EXPECT_GT(scores[s], scores[0]) << s;
  // Among the five copies, the latest scores best (least redundant).
  for (int s : {0, 8, 9, 10}) EXPECT_LT(scores[s], scores[11]) << s;
}

}  // namespace
}  // namespace beacon
