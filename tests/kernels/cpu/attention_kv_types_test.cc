// The attention kernels on bf16 and q8_0 caches: each kernel (the AVX-512
// prefill tiles, the portable per-token path, the keys-in-lanes decode step,
// the AVX2 kernel)
// must give on such a view exactly the bits it gives on an f32 view of the
// same stored values, since widening is exact and the arithmetic after it is
// the f32 kernel's. Decode and prefill then also agree bit for bit on every
// type, which keeps the engine's logits independent of how a prompt was
// chunked.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/prefill_attention.h"
#include "kernels/cpu/quantize.h"

namespace beacon {
namespace {

// One KV head laid out as kv/store/kv_cache.h does, twice: rows of `type` (bf16
// or q8_0) and the same stored values widened to f32. Unused slots hold NaN
// in the f32 twin and in bf16, and a NaN scale in q8_0.
struct TwinHead {
  int d, bs;
  DType type;
  size_t stride;  // elements between consecutive blocks
  std::vector<float> k32, v32;
  std::vector<uint8_t> kq, vq;
  std::vector<int32_t> blocks;

  TwinHead(int head_dim, int block_size, int32_t n_slots, std::mt19937& rng, DType t = DType::kBF16)
      : d(head_dim), bs(block_size), type(t), stride(static_cast<size_t>(block_size) * head_dim * 2) {
    const int32_t n_blocks = (n_slots + bs - 1) / bs;
    blocks.resize(n_blocks);
    std::iota(blocks.begin(), blocks.end(), 1);  // block 0 is never read
    std::shuffle(blocks.begin(), blocks.end(), rng);
    const size_t n = stride * (n_blocks + 1);
    const size_t row = DTypeRowBytes(t, d);
    kq.assign(DTypeRowBytes(t, static_cast<int64_t>(n)), 0);
    vq.assign(kq.size(), 0);
    std::vector<float> nan_row(d, std::numeric_limits<float>::quiet_NaN());
    for (size_t at = 0; at < n; at += d) {  // every row NaN first
      QuantizeRow(t, nan_row.data(), &kq[DTypeRowBytes(t, static_cast<int64_t>(at))], d);
      QuantizeRow(t, nan_row.data(), &vq[DTypeRowBytes(t, static_cast<int64_t>(at))], d);
    }
    std::normal_distribution<float> nd;
    std::vector<float> kr(d), vr(d);
    for (int32_t s = 0; s < n_slots; ++s) {
      const size_t at = blocks[s / bs] * stride + static_cast<size_t>(s % bs) * d;
      for (int c = 0; c < d; ++c) {
        kr[c] = 1.5f * nd(rng);
        vr[c] = nd(rng);
      }
      QuantizeRow(t, kr.data(), &kq[DTypeRowBytes(t, static_cast<int64_t>(at))], d);
      QuantizeRow(t, vr.data(), &vq[DTypeRowBytes(t, static_cast<int64_t>(at))], d);
    }
    k32.resize(n);
    v32.resize(n);
    for (size_t at = 0; at < n; at += d) {
      DequantizeRow(t, &kq[DTypeRowBytes(t, static_cast<int64_t>(at))], &k32[at], d);
      DequantizeRow(t, &vq[DTypeRowBytes(t, static_cast<int64_t>(at))], &v32[at], d);
    }
    (void)row;
  }
  PagedHeadView View(DType t) const {
    PagedHeadView v;
    v.k_head_base = t == DType::kF32 ? static_cast<const void*>(k32.data()) : kq.data();
    v.v_head_base = t == DType::kF32 ? static_cast<const void*>(v32.data()) : vq.data();
    v.block_stride = stride;
    v.block_ids = blocks.data();
    v.block_size = bs;
    v.head_dim = d;
    v.dtype = t;
    return v;
  }
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

struct Shape {
  int head_dim, g_heads, block_size;
  DType type = DType::kBF16;
};

class AttentionKvTypesTest : public ::testing::TestWithParam<Shape> {};

using Kernel = void (*)(const PrefillQueries&, const PagedHeadView&, float, float*);

std::vector<float> Prefill(Kernel k, const std::vector<float>& q, const Shape& p, const PagedHeadView& view,
                           int32_t n) {
  std::vector<float> out(q.size(), 0.0f);
  PrefillQueries qs;
  qs.q = q.data();
  qs.q_token_stride = static_cast<int64_t>(p.g_heads) * p.head_dim;
  qs.out = out.data();
  qs.out_token_stride = qs.q_token_stride;
  qs.n_q_heads = p.g_heads;
  qs.n_tokens = n;
  k(qs, view, 1.0f / std::sqrt(static_cast<float>(p.head_dim)), nullptr);
  return out;
}

TEST_P(AttentionKvTypesTest, ViewGivesTheF32BitsOfTheStoredValues) {
  const Shape& p = GetParam();
  std::mt19937 rng(11 + p.head_dim);
  const int32_t n = 300;  // key tiles, a ragged last one, two key segments
  TwinHead kv(p.head_dim, p.block_size, n, rng, p.type);
  std::vector<float> q(static_cast<size_t>(n) * p.g_heads * p.head_dim);
  std::normal_distribution<float> nd;
  for (float& x : q) x = nd(rng);
  std::vector<std::pair<const char*, Kernel>> kernels = {{"dispatched", &PrefillAttention},
                                                         {"generic", &PrefillAttentionGeneric}};
  if (Avx2AttentionSupported(p.head_dim)) kernels.push_back({"avx2", &PrefillAttentionAvx2});
  for (const auto& [name, k] : kernels) {
    const std::vector<float> f32 = Prefill(k, q, p, kv.View(DType::kF32), n);
    const std::vector<float> typed = Prefill(k, q, p, kv.View(p.type), n);
    for (float x : typed) ASSERT_TRUE(std::isfinite(x)) << name << ": a NaN slot past the end was read";
    EXPECT_TRUE(SameBits(f32, typed)) << name;
  }
  // Decode steps on the typed view: the f32 view's bits, the prefill's bits,
  // and the same probabilities.
  const std::vector<float> whole = Prefill(&PrefillAttention, q, p, kv.View(p.type), n);
  const size_t row = static_cast<size_t>(p.g_heads) * p.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  for (int32_t i = 0; i < n; ++i) {
    std::vector<float> o16(row), o32(row), p16(p.g_heads * (i + 1)), p32(p16.size());
    PagedAttention(&q[i * row], p.g_heads, kv.View(p.type), i + 1, scale, p16.data(), o16.data());
    PagedAttention(&q[i * row], p.g_heads, kv.View(DType::kF32), i + 1, scale, p32.data(), o32.data());
    ASSERT_TRUE(SameBits(o16, o32)) << "token " << i;
    ASSERT_TRUE(SameBits(p16, p32)) << "token " << i;
    ASSERT_TRUE(SameBits(o16, std::vector<float>(whole.begin() + i * row, whole.begin() + (i + 1) * row)))
        << "token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionKvTypesTest,
                         ::testing::Values(Shape{64, 3, 16},   // the default model
                                           Shape{128, 4, 16},  // a full row pass
                                           Shape{96, 5, 8},    // 32-column value block
                                           Shape{40, 3, 16},   // head dim % 16 != 0: the prefill kernel decodes
                                           Shape{20, 2, 4},    // head dim % 8 != 0: the generic path
                                           Shape{64, 3, 16, DType::kQ8_0},    // q8_0, the default model's shape
                                           Shape{128, 4, 8, DType::kQ8_0},    // q8_0, 4 blocks per row
                                           Shape{96, 5, 16, DType::kQ8_0}));  // q8_0, rows of 3 blocks

TEST(AttentionKvTypes, ViewRowsWidenExactly) {
  std::mt19937 rng(2);
  TwinHead kv(72, 8, 20, rng);  // 72: a 16-lane run and a scalar tail
  const PagedHeadView v16 = kv.View(DType::kBF16), v32 = kv.View(DType::kF32);
  std::vector<float> buf(72);
  for (int32_t s = 0; s < 20; ++s) {
    const float* k = v16.KeyF32(s, buf.data());
    EXPECT_EQ(k, buf.data());
    for (int c = 0; c < 72; ++c) ASSERT_EQ(std::bit_cast<uint32_t>(k[c]), std::bit_cast<uint32_t>(v32.key(s)[c]));
    EXPECT_EQ(v32.KeyF32(s, buf.data()), v32.key(s)) << "an f32 view needs no copy";
    const float* v = v16.ValueF32(s, buf.data());
    for (int c = 0; c < 72; ++c) ASSERT_EQ(std::bit_cast<uint32_t>(v[c]), std::bit_cast<uint32_t>(v32.value(s)[c]));
  }
}

}  // namespace
}  // namespace beacon
