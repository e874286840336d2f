// bf16 and q8_0 KvCaches: half (bf16) and ~0.27x (q8_0) the bytes of f32 per
// token; compaction moves their rows; and the policies that read keys
// (AttentionScores' tiled product, SnapKV's and R-KV's scalar loops, BeaconKV)
// score them as they score an f32 cache holding the same stored values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/key_logits.h"
#include "kernels/cpu/quantize.h"
#include "kv/policy/attention_scoring.h"
#include "kv/policy/kv_policy.h"
#include "kv/store/compaction.h"
#include "kv/store/kv_cache.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

KvCacheShape Shape(DType t, int block_size = 4) {
  KvCacheShape s{2, 2, 32, block_size};
  s.dtype = t;
  return s;
}

TEST(KvCacheTypes, BytesPerToken) {
  const KvCache f32(Shape(DType::kF32), 8), bf16(Shape(DType::kBF16), 8), q8(Shape(DType::kQ8_0), 8);
  EXPECT_EQ(f32.BytesPerToken(), 2u * 2 * 2 * 32 * 4);
  EXPECT_EQ(bf16.BytesPerToken() * 2, f32.BytesPerToken());
  EXPECT_EQ(q8.BytesPerToken(), 2u * 2 * 2 * 34) << "one 34-byte block per 32-element row";
  EXPECT_EQ(bf16.block_stride(), f32.block_stride()) << "strides count elements, not bytes";
  EXPECT_EQ(q8.block_stride(), f32.block_stride());
}

// Two caches, one sequence each, with the same block tables: rows of `type`
// (bf16 or q8_0), and the same stored values widened to f32.
struct Twins {
  std::unique_ptr<KvCache> c16, c32;  // c16: the typed cache
  std::unique_ptr<SequenceKv> s16, s32;

  Twins(int32_t n, std::mt19937& rng, int block_size = 4, DType type = DType::kBF16) {
    c16 = std::make_unique<KvCache>(Shape(type, block_size), 64);
    c32 = std::make_unique<KvCache>(Shape(DType::kF32, block_size), 64);
    s16 = std::make_unique<SequenceKv>(c16.get());
    s32 = std::make_unique<SequenceKv>(c32.get());
    EXPECT_TRUE(s16->Reserve(n).ok());
    EXPECT_TRUE(s32->Reserve(n).ok());
    std::normal_distribution<float> nd;
    const KvCacheShape& sh = c16->shape();
    const size_t row = sh.row_bytes();
    std::vector<float> x(sh.head_dim);
    for (int l = 0; l < sh.n_layers; ++l) {
      for (int h = 0; h < sh.n_kv_heads; ++h) {
        for (int32_t s = 0; s < n; ++s) {
          const int32_t b = s16->block_ids()[s / block_size];
          const int32_t b32 = s32->block_ids()[s / block_size];
          const int off = s % block_size;
          for (bool values : {false, true}) {
            for (float& e : x) e = nd(rng);
            auto* dst = static_cast<uint8_t*>(values ? c16->VData(l, b, h) : c16->KData(l, b, h)) + off * row;
            QuantizeRow(type, x.data(), dst, sh.head_dim);
            DequantizeRow(type, dst, (values ? c32->V(l, b32, h) : c32->K(l, b32, h)) + off * sh.head_dim, sh.head_dim);
          }
          c16->Positions(l, b, h)[off] = 3 * s;
          c32->Positions(l, b32, h)[off] = 3 * s;
        }
      }
    }
    s16->CommitSlots(n);
    s32->CommitSlots(n);
  }
  // Every K and V element of (layer, head), slots [0, n), widened.
  static std::vector<float> Rows(const KvCache& c, const SequenceKv& s, int l, int h, bool values) {
    std::vector<float> out;
    const int bs = c.shape().block_size, d = c.shape().head_dim;
    std::vector<float> x(d);
    for (int32_t i = 0; i < s.num_slots(); ++i) {
      const int32_t b = s.block_ids()[i / bs];
      const auto* row = static_cast<const uint8_t*>(values ? c.VData(l, b, h) : c.KData(l, b, h)) +
                        static_cast<size_t>(i % bs) * c.shape().row_bytes();
      DequantizeRow(c.dtype(), row, x.data(), d);
      out.insert(out.end(), x.begin(), x.end());
    }
    return out;
  }
};

class KvCacheTypesTest : public ::testing::TestWithParam<DType> {};

TEST_P(KvCacheTypesTest, CompactionMovesTheSameRowsAsOnF32) {
  std::mt19937 rng(5);
  const int32_t n = 37;
  Twins t(n, rng, 4, GetParam());
  std::vector<std::vector<int32_t>> keep(2);
  keep[0] = {0, 1, 5, 9, 10, 20, 36};
  keep[1] = {2, 3, 4, 17, 18, 30, 35};
  for (int l = 0; l < 2; ++l) {
    CompactLayer(t.c16.get(), *t.s16, l, keep);
    CompactLayer(t.c32.get(), *t.s32, l, keep);
  }
  t.s16->Truncate(7);
  t.s32->Truncate(7);
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) {
      for (bool values : {false, true}) {
        const std::vector<float> a = Twins::Rows(*t.c16, *t.s16, l, h, values);
        const std::vector<float> b = Twins::Rows(*t.c32, *t.s32, l, h, values);
        ASSERT_EQ(a, b) << "layer " << l << " head " << h << (values ? " V" : " K");
      }
      const KeysView k(t.c16.get(), t.s16.get(), l);
      for (int32_t i = 0; i < 7; ++i) EXPECT_EQ(k.position(h, i), 3 * keep[h][i]);
    }
  }
}

TEST_P(KvCacheTypesTest, GatherWidensEveryHeadRow) {
  std::mt19937 rng(6);
  Twins t(23, rng, 5, GetParam());  // 23 slots over blocks of 5: a ragged last block
  for (int h = 0; h < 2; ++h) {
    std::vector<float> g16, g32;
    KeysView(t.c16.get(), t.s16.get(), 1).GatherF32(h, &g16);
    KeysView(t.c32.get(), t.s32.get(), 1).GatherF32(h, &g32);
    EXPECT_EQ(g16, Twins::Rows(*t.c32, *t.s32, 1, h, false));
    EXPECT_EQ(g16, g32);
  }
}

// The twins' scores under one policy `o` (2 layers, 4 query heads over 2
// KV heads of 32): both policies observe the same 60 positions' queries,
// then score their own twin; one (typed, f32) pair per (layer, KV head).
PolicyModelInfo TwinModel() {
  PolicyModelInfo m;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 32;
  return m;
}

std::vector<std::pair<std::vector<float>, std::vector<float>>> ScoreTwins(const KvPolicyOptions& o, DType type,
                                                                          uint32_t seed) {
  const PolicyModelInfo m = TwinModel();
  std::mt19937 rng(seed);
  const int32_t n = 60;
  Twins t(n, rng, 4, type);
  auto p16 = CreateKvPolicy(o, m), p32 = CreateKvPolicy(o, m);
  EXPECT_TRUE(p16.ok() && p32.ok());
  if (!p16.ok() || !p32.ok()) return {};
  std::normal_distribution<float> nd;
  for (int32_t pos = 0; pos < n; ++pos) {
    for (int l = 0; l < m.n_layers; ++l) {
      std::vector<float> q(m.n_heads * m.head_dim);
      for (float& x : q) x = nd(rng);
      (*p16)->ObserveQuery(l, q.data(), 3 * pos);
      (*p32)->ObserveQuery(l, q.data(), 3 * pos);
    }
  }
  std::vector<std::pair<std::vector<float>, std::vector<float>>> out;
  for (int l = 0; l < m.n_layers; ++l) {
    for (int h = 0; h < m.n_kv_heads; ++h) {
      std::vector<float> a(n), b(n);
      (*p16)->Score(l, h, KeysView(t.c16.get(), t.s16.get(), l), 3 * n, a.data());
      (*p32)->Score(l, h, KeysView(t.c32.get(), t.s32.get(), l), 3 * n, b.data());
      out.emplace_back(std::move(a), std::move(b));
    }
  }
  return out;
}

// The `k` best slots of v (ties: the lower slot), ascending: what an
// eviction to budget k keeps.
std::vector<int32_t> TopSlots(const std::vector<float>& v, int k) {
  std::vector<int32_t> idx(v.size());
  for (size_t s = 0; s < v.size(); ++s) idx[s] = static_cast<int32_t>(s);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) { return v[x] > v[y]; });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Each key-reading policy scores the twins alike: to float rounding (the
// tiled product may contract differently on the two types) and with the
// same ranking of slots. Where a bf16 cache is scored in bf16 (its queries
// rounded to 8 significant bits; Bf16CacheScoresTheBf16RoundedQueries below
// pins that exactly), alike to 1% and with the same top slots bar a near-tie
// or two.
TEST_P(KvCacheTypesTest, PoliciesScoreTheTwinsAlike) {
  const bool rounds = GetParam() == DType::kBF16 && KeyBlockLogitsBf16Supported(TwinModel().head_dim);
  for (const char* name : {"snapkv", "rkv", "beacon", "h2o"}) {
    absl::StatusOr<KvPolicyOptions> o = KvPolicyOptions::DefaultsForName(name);
    ASSERT_TRUE(o.ok());
    o->budget = 16;
    o->window = 8;
    o->sinks = 2;
    o->recent_queries = 8;
    int i = 0;
    for (const auto& [a, b] : ScoreTwins(*o, GetParam(), 7)) {
      for (size_t s = 0; s < a.size(); ++s) {
        const double tol = rounds ? 1e-2 * std::fabs(b[s]) + 1e-5 : 1e-5 * (1 + std::fabs(b[s]));
        ASSERT_NEAR(a[s], b[s], tol) << name << " (layer, head) " << i;
      }
      std::vector<int32_t> ta = TopSlots(a, o->budget), tb = TopSlots(b, o->budget), common;
      std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(common));
      EXPECT_GE(common.size(), static_cast<size_t>(rounds ? o->budget - 2 : o->budget))
          << name << " (layer, head) " << i;
      ++i;
    }
  }
}

// AttentionScores on a bf16 cache is AttentionScores on the f32 twin of the
// bf16-rounded queries where the build scores in bf16 (AVX-512 BF16,
// attention_scoring.h), and of the queries themselves elsewhere: to f32
// rounding, for every aggregate, with and without the causal mask.
TEST(KvCacheTypes, Bf16CacheScoresTheBf16RoundedQueries) {
  std::mt19937 rng(9);
  const int32_t n = 45;
  Twins t(n, rng, 4, DType::kBF16);
  const int d = 32, n_queries = 11;
  std::vector<float> q(n_queries * d), q_seen(q.size());
  std::normal_distribution<float> nd;
  for (float& v : q) v = 2.0f * nd(rng);
  std::vector<int32_t> pos(n_queries);
  for (int j = 0; j < n_queries; ++j) pos[j] = 11 * j;  // some see every slot, some a prefix
  const bool rounds = KeyBlockLogitsBf16Supported(d);
  for (size_t i = 0; i < q.size(); ++i) q_seen[i] = rounds ? Bf16ToFp32(Fp32ToBf16(q[i])) : q[i];
  std::vector<float> scratch;
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) {
      for (ScoreAggregate agg : {ScoreAggregate::kMax, ScoreAggregate::kSum}) {
        for (const int32_t* qp : std::vector<const int32_t*>{nullptr, pos.data()}) {
          std::vector<float> a(n), b(n);
          AttentionScores(q.data(), n_queries, KeysView(t.c16.get(), t.s16.get(), l), h, agg, a.data(), &scratch, qp);
          AttentionScores(q_seen.data(), n_queries, KeysView(t.c32.get(), t.s32.get(), l), h, agg, b.data(), &scratch,
                          qp);
          for (int32_t s = 0; s < n; ++s) {
            ASSERT_NEAR(a[s], b[s], 2e-6 * (1 + std::fabs(b[s])))
                << "layer " << l << " head " << h << " slot " << s << (qp ? " causal" : "");
          }
          // bf16_products = false: the queries as given, on every build.
          AttentionScores(q.data(), n_queries, KeysView(t.c16.get(), t.s16.get(), l), h, agg, a.data(), &scratch, qp,
                          /*bf16_products=*/false);
          AttentionScores(q.data(), n_queries, KeysView(t.c32.get(), t.s32.get(), l), h, agg, b.data(), &scratch, qp);
          for (int32_t s = 0; s < n; ++s) {
            ASSERT_NEAR(a[s], b[s], 2e-6 * (1 + std::fabs(b[s]))) << "f32 products, layer " << l << " slot " << s;
          }
        }
      }
    }
  }
}

// BeaconKV with its f32 state (beacon_bf16_state off, the measurement of
// what rounding changes) rounds nowhere: it scores a bf16 cache as the f32
// twin of the same stored keys, to f32 rounding, on every build.
TEST(KvCacheTypes, BeaconWithF32StateScoresInF32) {
  absl::StatusOr<KvPolicyOptions> o = KvPolicyOptions::DefaultsForName("beacon");
  ASSERT_TRUE(o.ok());
  o->budget = 16;
  o->window = 8;
  o->recent_queries = 8;
  o->beacon_bf16_state = false;
  const auto twins = ScoreTwins(*o, DType::kBF16, 8);
  ASSERT_EQ(twins.size(), 4u);
  for (const auto& [a, b] : twins) {
    for (size_t s = 0; s < a.size(); ++s) ASSERT_NEAR(a[s], b[s], 1e-5 * (1 + std::fabs(b[s]))) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheTypesTest, ::testing::Values(DType::kBF16, DType::kQ8_0),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(DTypeName(i.param)); });

}  // namespace
}  // namespace beacon
