// A bf16 KvCache: half the bytes of f32 per token; compaction moves its
// 16-bit rows; and the policies that read keys (AttentionScores' tiled
// product, SnapKV's and R-KV's scalar loops, BeaconKV) score a bf16 cache as
// they score an f32 cache holding the same rounded values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kv/compaction.h"
#include "kv/kv_cache.h"
#include "kv/kv_policy.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

KvCacheShape Shape(DType t, int block_size = 4) {
  KvCacheShape s{2, 2, 32, block_size};
  s.dtype = t;
  return s;
}

TEST(KvCacheBf16, HalvesTheBytesPerToken) {
  const KvCache f32(Shape(DType::kF32), 8), bf16(Shape(DType::kBF16), 8);
  EXPECT_EQ(f32.BytesPerToken(), 2u * 2 * 2 * 32 * 4);
  EXPECT_EQ(bf16.BytesPerToken() * 2, f32.BytesPerToken());
  EXPECT_EQ(bf16.block_stride(), f32.block_stride()) << "strides count elements, not bytes";
}

// Two caches, one sequence each, with the same block tables: bf16 bits, and
// the same values widened to f32.
struct Twins {
  std::unique_ptr<KvCache> c16, c32;
  std::unique_ptr<SequenceKv> s16, s32;

  Twins(int32_t n, std::mt19937& rng, int block_size = 4) {
    c16 = std::make_unique<KvCache>(Shape(DType::kBF16, block_size), 64);
    c32 = std::make_unique<KvCache>(Shape(DType::kF32, block_size), 64);
    s16 = std::make_unique<SequenceKv>(c16.get());
    s32 = std::make_unique<SequenceKv>(c32.get());
    EXPECT_TRUE(s16->Reserve(n).ok());
    EXPECT_TRUE(s32->Reserve(n).ok());
    std::normal_distribution<float> nd;
    const KvCacheShape& sh = c16->shape();
    for (int l = 0; l < sh.n_layers; ++l) {
      for (int h = 0; h < sh.n_kv_heads; ++h) {
        for (int32_t s = 0; s < n; ++s) {
          const int32_t b = s16->block_ids()[s / block_size];
          const int32_t b32 = s32->block_ids()[s / block_size];
          const int off = s % block_size;
          for (int c = 0; c < sh.head_dim; ++c) {
            const uint16_t k = Fp32ToBf16(nd(rng)), v = Fp32ToBf16(nd(rng));
            c16->KBf16(l, b, h)[off * sh.head_dim + c] = k;
            c16->VBf16(l, b, h)[off * sh.head_dim + c] = v;
            c32->K(l, b32, h)[off * sh.head_dim + c] = Bf16ToFp32(k);
            c32->V(l, b32, h)[off * sh.head_dim + c] = Bf16ToFp32(v);
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
    for (int32_t i = 0; i < s.num_slots(); ++i) {
      const int32_t b = s.block_ids()[i / bs];
      for (int e = 0; e < d; ++e) {
        const size_t at = static_cast<size_t>(i % bs) * d + e;
        if (c.dtype() == DType::kBF16) {
          out.push_back(Bf16ToFp32((values ? c.VBf16(l, b, h) : c.KBf16(l, b, h))[at]));
        } else {
          out.push_back((values ? c.V(l, b, h) : c.K(l, b, h))[at]);
        }
      }
    }
    return out;
  }
};

TEST(KvCacheBf16, CompactionMovesTheSameRowsAsOnF32) {
  std::mt19937 rng(5);
  const int32_t n = 37;
  Twins t(n, rng);
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

TEST(KvCacheBf16, GatherWidensEveryHeadRow) {
  std::mt19937 rng(6);
  Twins t(23, rng, 5);  // 23 slots over blocks of 5: a ragged last block
  for (int h = 0; h < 2; ++h) {
    std::vector<float> g16, g32;
    KeysView(t.c16.get(), t.s16.get(), 1).GatherF32(h, &g16);
    KeysView(t.c32.get(), t.s32.get(), 1).GatherF32(h, &g32);
    EXPECT_EQ(g16, Twins::Rows(*t.c32, *t.s32, 1, h, false));
    EXPECT_EQ(g16, g32);
  }
}

// Each key-reading policy scores the twins alike: to float rounding (the
// tiled product may contract differently on the two types) and with the
// same ranking of slots.
TEST(KvCacheBf16, PoliciesScoreTheTwinsAlike) {
  PolicyModelInfo m;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 32;
  for (const char* name : {"snapkv", "rkv", "beacon", "h2o"}) {
    std::mt19937 rng(7);
    const int32_t n = 60;
    Twins t(n, rng);
    absl::StatusOr<KvPolicyOptions> o = KvPolicyOptions::DefaultsForName(name);
    ASSERT_TRUE(o.ok());
    o->budget = 16;
    o->window = 8;
    o->sinks = 2;
    o->recent_queries = 8;
    auto p16 = CreateKvPolicy(*o, m), p32 = CreateKvPolicy(*o, m);
    ASSERT_TRUE(p16.ok() && p32.ok()) << name;
    std::normal_distribution<float> nd;
    for (int32_t pos = 0; pos < n; ++pos) {
      for (int l = 0; l < 2; ++l) {
        std::vector<float> q(4 * 32);
        for (float& x : q) x = nd(rng);
        (*p16)->ObserveQuery(l, q.data(), 3 * pos);
        (*p32)->ObserveQuery(l, q.data(), 3 * pos);
      }
    }
    for (int l = 0; l < 2; ++l) {
      for (int h = 0; h < 2; ++h) {
        std::vector<float> a(n), b(n);
        (*p16)->Score(l, h, KeysView(t.c16.get(), t.s16.get(), l), 3 * n, a.data());
        (*p32)->Score(l, h, KeysView(t.c32.get(), t.s32.get(), l), 3 * n, b.data());
        for (int32_t s = 0; s < n; ++s) {
          ASSERT_NEAR(a[s], b[s], 1e-5 * (1 + std::fabs(b[s]))) << name << " layer " << l << " head " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace beacon
