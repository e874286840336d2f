// The shared scoring helpers against naive double-precision references.
#include "kv/policy/attention_scoring.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

using kvtest::NaiveDot;
using kvtest::NaiveMaxPool;
using kvtest::NaiveRope;
using kvtest::NaiveSoftmax;

class QueryRotatorTest : public ::testing::TestWithParam<bool> {};

TEST_P(QueryRotatorTest, MatchesNaiveRope) {
  const bool interleaved = GetParam();
  for (int d : {8, 64}) {
    PolicyModelInfo m = kvtest::SmallModel(interleaved);
    m.head_dim = d;
    m.rope_theta = d == 8 ? 10000.0f : 1000000.0f;
    QueryRotator rot(m);
    std::mt19937 rng(d);
    for (int32_t pos : {0, 1, 7, 513, 32768, 131071}) {
      const std::vector<float> q = kvtest::RandomVector(d, rng);
      std::vector<float> out(d);
      rot.Rotate(q.data(), pos, out.data());
      const std::vector<double> want = NaiveRope(q.data(), d, pos, m.rope_theta, interleaved);
      for (int c = 0; c < d; ++c) EXPECT_NEAR(out[c], want[c], 2e-5) << "d=" << d << " pos=" << pos << " c=" << c;
      // In place gives the same.
      std::vector<float> inplace = q;
      rot.Rotate(inplace.data(), pos, inplace.data());
      EXPECT_EQ(inplace, out);
    }
  }
}

// The two-part form the policies use when many queries share a position
// (issue 34) must be Rotate bit for bit, in place or not, on a scaled table
// too: the eviction scores must not move with it.
TEST_P(QueryRotatorTest, TableThenApplyIsRotateBitForBit) {
  const bool interleaved = GetParam();
  const int d = 64;
  PolicyModelInfo m = kvtest::SmallModel(interleaved);
  m.head_dim = d;
  m.rope_theta = 1e6f;
  for (bool scaled : {false, true}) {
    if (scaled)
      m.rope = MakeRopeTable(1e6f, d, {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64});
    const QueryRotator rot(m);
    ASSERT_EQ(rot.head_dim(), d);
    std::mt19937 rng(scaled ? 5 : 3);
    std::vector<float> cs(d);
    for (int32_t pos : {0, 3, 513, 32768, 131071}) {
      rot.Table(pos, cs.data());
      for (int k = 0; k < 3; ++k) {  // one table, several queries
        const std::vector<float> q = kvtest::RandomVector(d, rng);
        std::vector<float> want(d), got(d);
        rot.Rotate(q.data(), pos, want.data());
        rot.Apply(q.data(), cs.data(), got.data());
        EXPECT_EQ(got, want) << "pos " << pos << " scaled " << scaled;
        std::vector<float> inplace = q;
        rot.Apply(inplace.data(), cs.data(), inplace.data());
        EXPECT_EQ(inplace, want);
      }
    }
  }
}

TEST_P(QueryRotatorTest, StylesDiffer) {
  // Guards the naive reference itself: the two pairings are different maps.
  const std::vector<float> q = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> a = NaiveRope(q.data(), 8, 5, 10000.0, false);
  const std::vector<double> b = NaiveRope(q.data(), 8, 5, 10000.0, true);
  EXPECT_NE(a, b);
  // Position 0 is the identity in both.
  EXPECT_EQ(NaiveRope(q.data(), 8, 0, 10000.0, GetParam()), std::vector<double>(q.begin(), q.end()));
}

// A scaled model (YaRN: frequencies and attention factor) rotates stored
// queries with its own table, as the forward pass rotates q and k: pair i
// turns by position * inv_freq[i] and is scaled by the attention factor.
TEST_P(QueryRotatorTest, UsesTheModelsScaledTable) {
  const bool interleaved = GetParam();
  const int d = 64;
  PolicyModelInfo m = kvtest::SmallModel(interleaved);
  m.head_dim = d;
  m.rope_theta = 1e6f;
  m.rope = MakeRopeTable(1e6f, d, {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64});
  ASSERT_GT(m.rope.attention_factor, 1.1f);
  const QueryRotator rot(m);
  std::mt19937 rng(11);
  for (int32_t pos : {0, 5, 200, 40000}) {
    const std::vector<float> q = kvtest::RandomVector(d, rng);
    std::vector<float> out(d);
    rot.Rotate(q.data(), pos, out.data());
    for (int i = 0; i < d / 2; ++i) {
      const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + d / 2;
      const double ang = static_cast<double>(pos) * m.rope.inv_freq[i], f = m.rope.attention_factor;
      EXPECT_NEAR(out[a], f * (q[a] * std::cos(ang) - q[b] * std::sin(ang)), 3e-5) << pos << " " << i;
      EXPECT_NEAR(out[b], f * (q[a] * std::sin(ang) + q[b] * std::cos(ang)), 3e-5) << pos << " " << i;
    }
  }
  // Guards the test: an empty table is the unscaled RoPE of rope_theta.
  PolicyModelInfo unscaled = m;
  unscaled.rope = {};
  const std::vector<float> q = kvtest::RandomVector(d, rng);
  std::vector<float> a(d), b(d);
  QueryRotator(unscaled).Rotate(q.data(), 200, a.data());
  rot.Rotate(q.data(), 200, b.data());
  EXPECT_NE(a, b);
  const std::vector<double> want = NaiveRope(q.data(), d, 200, 1e6, interleaved);
  for (int c = 0; c < d; ++c) EXPECT_NEAR(a[c], want[c], 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Styles, QueryRotatorTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Interleaved" : "NeoX"; });

TEST(AttentionScores, MatchesNaiveForEveryAggregate) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(3);
  kvtest::TestSequence seq(m, 4, 32);
  const std::vector<int32_t> pos = kvtest::AscendingPositions(45, 3, rng);
  seq.Append(pos, rng);
  const int d = m.head_dim;
  const int n_queries = 5;
  const std::vector<float> queries = kvtest::RandomVector(static_cast<size_t>(n_queries) * d, rng, 2.0f);
  std::vector<float> scratch;
  for (int layer = 0; layer < m.n_layers; ++layer) {
    const KeysView keys = seq.keys(layer);
    for (int h = 0; h < m.n_kv_heads; ++h) {
      // Naive: per query, softmax of q.k / sqrt(d) over all slots.
      std::vector<std::vector<double>> p(n_queries);
      for (int j = 0; j < n_queries; ++j) {
        std::vector<double> q(queries.begin() + j * d, queries.begin() + (j + 1) * d);
        std::vector<double> logits(keys.n_slots());
        for (int32_t s = 0; s < keys.n_slots(); ++s) logits[s] = NaiveDot(q, keys.key(h, s)) / std::sqrt(double(d));
        p[j] = NaiveSoftmax(logits);
      }
      for (ScoreAggregate agg : {ScoreAggregate::kMax, ScoreAggregate::kSum, ScoreAggregate::kMean}) {
        std::vector<float> got(keys.n_slots(), -1.0f);
        AttentionScores(queries.data(), n_queries, keys, h, agg, got.data(), &scratch);
        for (int32_t s = 0; s < keys.n_slots(); ++s) {
          double want = 0.0;
          for (int j = 0; j < n_queries; ++j)
            want = agg == ScoreAggregate::kMax ? std::max(want, p[j][s]) : want + p[j][s];
          if (agg == ScoreAggregate::kMean) want /= n_queries;
          EXPECT_NEAR(got[s], want, 1e-6 + 1e-5 * want) << "agg=" << int(agg) << " slot " << s;
        }
      }
    }
  }
}

TEST(AttentionScores, SumOfOneQueryIsADistribution) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(5);
  kvtest::TestSequence seq(m, 4, 8);
  seq.Append(kvtest::AscendingPositions(13, 1, rng), rng);
  const std::vector<float> q = kvtest::RandomVector(m.head_dim, rng);
  std::vector<float> got(13), scratch;
  AttentionScores(q.data(), 1, seq.keys(1), 1, ScoreAggregate::kSum, got.data(), &scratch);
  double total = 0;
  for (float v : got) total += v;
  EXPECT_NEAR(total, 1.0, 1e-5);
}

// With query positions the softmax is causal: a key newer than the query
// gets exactly 0 and the visible keys' probabilities still sum to 1; a query
// that sees nothing adds nothing; without positions every key counts.
TEST(AttentionScores, QueryPositionsMaskNewerKeysCausally) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(6);
  kvtest::TestSequence seq(m, 4, 8);
  seq.Append(kvtest::AscendingPositions(13, 1, rng), rng);
  const KeysView keys = seq.keys(0);
  std::vector<float> q = kvtest::RandomVector(2 * m.head_dim, rng);
  const int32_t qpos = keys.position(0, 6);  // sees slots 0..6
  const int32_t before_all = keys.position(0, 0) - 1;
  std::vector<float> got(13), scratch;
  const int32_t pos[2] = {qpos, before_all};
  AttentionScores(q.data(), 2, keys, 0, ScoreAggregate::kSum, got.data(), &scratch, pos);
  double visible = 0;
  for (int s = 0; s < 13; ++s) {
    if (s > 6) {
      EXPECT_EQ(got[s], 0.0f) << s;
    } else {
      EXPECT_GT(got[s], 0.0f) << s;
      visible += got[s];
    }
  }
  EXPECT_NEAR(visible, 1.0, 1e-5);  // the second query saw no key and added nothing
  AttentionScores(q.data(), 1, keys, 0, ScoreAggregate::kSum, got.data(), &scratch);
  EXPECT_GT(got[12], 0.0f);  // unmasked
}

TEST(MaxPool1D, MatchesNaive) {
  std::mt19937 rng(9);
  for (int n : {0, 1, 2, 5, 6, 7, 40}) {
    for (int kernel : {1, 3, 5, 7, 9, 63}) {
      std::vector<float> x = kvtest::RandomVector(n, rng);
      // Ties and plateaus as well as distinct values.
      if (n > 3) x[2] = x[3];
      const std::vector<double> want = NaiveMaxPool(std::vector<double>(x.begin(), x.end()), kernel);
      MaxPool1D(x.data(), n, kernel);
      for (int s = 0; s < n; ++s)
        EXPECT_EQ(x[s], static_cast<float>(want[s])) << "n=" << n << " k=" << kernel << " s=" << s;
    }
  }
}

TEST(MaxPool1D, KernelOneAndPrefixOnly) {
  std::vector<float> x = {1, 5, 2, 0, 0, 9, 0};
  MaxPool1D(x.data(), 7, 1);
  EXPECT_EQ(x, (std::vector<float>{1, 5, 2, 0, 0, 9, 0}));
  // Pooling a prefix leaves the rest alone and does not read past n.
  MaxPool1D(x.data(), 4, 3);
  EXPECT_EQ(x, (std::vector<float>{5, 5, 5, 2, 0, 9, 0}));
}

}  // namespace
}  // namespace beacon
