// PrefillAttention (every path this build has) against a naive double-precision reference
// over a paged cache with shuffled blocks, for several head dims, GQA group
// sizes, block sizes, ragged lengths and chunks that start after slot 0; and
// the kernel's contract that a token's output does not depend on how its
// prompt is chunked, nor on anything stored past its own slot.
#include "kernels/cpu/prefill_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

// One KV head of one sequence, laid out as kv/store/kv_cache.h does (blocks of
// block_size slots, a block stride wider than one head, block ids shuffled).
struct PagedHead {
  int head_dim, block_size;
  size_t block_stride;
  std::vector<float> k, v;
  std::vector<int32_t> block_ids;

  PagedHead(int d, int bs, int32_t n_slots, float key_scale, std::mt19937& rng)
      : head_dim(d), block_size(bs), block_stride(static_cast<size_t>(bs) * d * 3) {
    const int32_t n_blocks = (n_slots + bs - 1) / bs;
    k.assign(block_stride * (n_blocks + 1), std::numeric_limits<float>::quiet_NaN());
    v.assign(k.size(), std::numeric_limits<float>::quiet_NaN());
    block_ids.resize(n_blocks);
    std::iota(block_ids.begin(), block_ids.end(), 1);  // block 0 stays NaN: never read
    std::shuffle(block_ids.begin(), block_ids.end(), rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int32_t s = 0; s < n_blocks * bs; ++s) {
      for (int c = 0; c < d; ++c) {
        // Slots past n_slots (the rest of the last block) hold NaN: a kernel
        // that lets them into any sum fails every check.
        Key(s)[c] = s < n_slots ? key_scale * u(rng) : std::numeric_limits<float>::quiet_NaN();
        Value(s)[c] = s < n_slots ? u(rng) : std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
  float* Key(int32_t s) { return k.data() + Offset(s); }
  float* Value(int32_t s) { return v.data() + Offset(s); }
  size_t Offset(int32_t s) const {
    return block_ids[s / block_size] * block_stride + static_cast<size_t>(s % block_size) * head_dim;
  }
  PagedHeadView View() const {
    PagedHeadView view;
    view.k_head_base = k.data();
    view.v_head_base = v.data();
    view.block_stride = block_stride;
    view.block_ids = block_ids.data();
    view.block_size = block_size;
    view.head_dim = head_dim;
    return view;
  }
};

// out[i][g] = sum_s softmax_s(scale q[i][g] . k_s) v_s over s <= first + i,
// in double, and each row's tolerance (see kUlps).
struct Expected {
  std::vector<double> out;
  std::vector<double> tol;  // per row (token i, head g)
};

// Tolerance: |out - ref| <= kUlps * 2^-24 * (1 + max_s |score_s|) per row
// (values are in [-1, 1]). Why: a score is a sum of head_dim f32 products,
// off by a few ulps of its magnitude; in the softmax that absolute error
// becomes the same relative error of a probability, to which the exponential
// (< 4 ulps here) and the running sums over tiles add a few ulps; the output,
// a convex combination of values, carries those relative errors times
// max |v| = 1. Observed: 1-6 ulps * (1 + max |score|) (~1e-7 for |scores|
// of a few, 1.2e-6 for the ramp below whose scores reach 21); a wrong mask,
// scale, rescaling or a lost key tile moves outputs by 1e-3 or more.
constexpr double kUlps = 32;

Expected Reference(const std::vector<float>& q, int g_heads, PagedHead& kv, int32_t first, int32_t n, float scale) {
  const int d = kv.head_dim;
  Expected e;
  std::vector<double>& out = e.out;
  out.assign(static_cast<size_t>(n) * g_heads * d, 0.0);
  for (int32_t i = 0; i < n; ++i) {
    for (int g = 0; g < g_heads; ++g) {
      const float* qr = &q[(static_cast<size_t>(i) * g_heads + g) * d];
      const int32_t n_keys = first + i + 1;
      std::vector<double> s(n_keys);
      for (int32_t j = 0; j < n_keys; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += static_cast<double>(qr[c]) * kv.Key(j)[c];
        s[j] = scale * dot;
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double max_abs = 0;
      for (double x : s) max_abs = std::max(max_abs, std::fabs(x));
      e.tol.push_back(kUlps * std::ldexp(1.0, -24) * (1 + max_abs));
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      double* o = &out[(static_cast<size_t>(i) * g_heads + g) * d];
      for (int32_t j = 0; j < n_keys; ++j) {
        for (int c = 0; c < d; ++c) o[c] += s[j] / sum * kv.Value(j)[c];
      }
    }
  }
  return e;
}

// Bit-for-bit equality of n floats (the chunking contract is exact).
bool SameBits(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

using Kernel = void (*)(const PrefillQueries&, const PagedHeadView&, float, float*);

std::vector<float> RunKernel(Kernel kernel, const std::vector<float>& q, int g_heads, const PagedHead& kv,
                             int32_t first, int32_t n, float scale) {
  const int d = kv.head_dim;
  std::vector<float> out(static_cast<size_t>(n) * g_heads * d, -1.0f);
  PrefillQueries qs;
  qs.q = q.data();
  qs.q_token_stride = static_cast<int64_t>(g_heads) * d;
  qs.out = out.data();
  qs.out_token_stride = qs.q_token_stride;
  qs.n_q_heads = g_heads;
  qs.first_slot = first;
  qs.n_tokens = n;
  kernel(qs, kv.View(), scale, nullptr);
  return out;
}

// The kernels to check at head dim d: the dispatching one, the portable one,
// and the AVX2 one where this build has it and takes d (what PrefillAttention
// runs on machines without AVX-512; named here so AVX-512 machines test it).
struct NamedKernel {
  const char* name;
  Kernel kernel;
};
std::vector<NamedKernel> Kernels(int d) {
  std::vector<NamedKernel> ks = {{"PrefillAttention", &PrefillAttention},
                                 {"PrefillAttentionGeneric", &PrefillAttentionGeneric}};
  if (Avx2AttentionSupported(d)) ks.push_back({"PrefillAttentionAvx2", &PrefillAttentionAvx2});
  return ks;
}

std::vector<float> RandomQueries(int32_t n, int g_heads, int d, float mag, std::mt19937& rng) {
  std::vector<float> q(static_cast<size_t>(n) * g_heads * d);
  std::uniform_real_distribution<float> u(-mag, mag);
  for (float& x : q) x = u(rng);
  return q;
}

void ExpectNear(const std::vector<float>& out, const Expected& ref, int d, const char* what) {
  ASSERT_EQ(out.size(), ref.out.size());
  int bad = 0;
  for (size_t i = 0; i < out.size() && bad < 5; ++i) {
    const double tol = ref.tol[i / d];
    if (!(std::fabs(out[i] - ref.out[i]) <= tol)) {  // NaN fails too
      ADD_FAILURE() << what << " element " << i << " (row " << i / d << "): " << out[i] << " vs " << ref.out[i]
                    << ", tolerance " << tol;
      ++bad;
    }
  }
}

struct Case {
  int head_dim, g_heads, block_size;
  int32_t first_slot, n_tokens;
  float q_mag;  // query entries in [-q_mag, q_mag]: larger = peakier softmax
};

class PrefillAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PrefillAttentionTest, MatchesNaiveReference) {
  const Case& p = GetParam();
  std::mt19937 rng(p.head_dim * 1000 + p.g_heads * 100 + p.block_size + p.first_slot + p.n_tokens);
  PagedHead kv(p.head_dim, p.block_size, p.first_slot + p.n_tokens, 1.0f, rng);
  const std::vector<float> q = RandomQueries(p.n_tokens, p.g_heads, p.head_dim, p.q_mag, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  const Expected ref = Reference(q, p.g_heads, kv, p.first_slot, p.n_tokens, scale);
  for (const NamedKernel& k : Kernels(p.head_dim)) {
    const std::vector<float> out = RunKernel(k.kernel, q, p.g_heads, kv, p.first_slot, p.n_tokens, scale);
    ExpectNear(out, ref, p.head_dim, k.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillAttentionTest,
                         ::testing::Values(Case{64, 3, 16, 0, 100, 1.0f},  // the default model's group, one prompt
                                           Case{64, 3, 16, 37, 52,
                                                1.0f},  // a chunk after 37 cached slots, 9 keys in its last tile
                                           Case{64, 3, 16, 256, 16, 4.0f},   // one full tile at a block boundary, peaky
                                           Case{64, 1, 5, 3, 61, 1.0f},      // MHA, odd block size, ragged tile
                                           Case{64, 4, 32, 100, 13, 2.0f},   // rows not a multiple of 16
                                           Case{64, 8, 16, 0, 7, 1.0f},      // 8 heads: 56 rows, two row tiles
                                           Case{128, 2, 16, 0, 40, 1.0f},    // head dim 128
                                           Case{128, 6, 8, 301, 9, 4.0f},    // head dim 128, after 301 slots, peaky
                                           Case{128, 50, 16, 20, 3, 1.0f},   // a group larger than a row tile
                                           Case{64, 3, 16, 500, 1, 1.0f},    // one token
                                           Case{96, 3, 16, 17, 33, 1.0f},    // head dim 96
                                           Case{64, 3, 16, 200, 420, 2.0f},  // three key segments (attention.h)
                                           Case{128, 4, 8, 760, 30, 4.0f},   // four segments, peaky
                                           Case{36, 3, 16, 10, 20, 1.0f}));  // head dim % 8 != 0: the generic path

// The same tokens, once in one call and again in chunks of assorted sizes
// (each chunk a call with its own first_slot, as chunked prefill makes them),
// give bit-identical outputs.
TEST(PrefillAttentionChunking, ChunksGiveIdenticalBits) {
  std::mt19937 rng(7);
  const int d = 64, g_heads = 3;
  const int32_t n = 700;  // past two key-segment boundaries (256, 512)
  PagedHead kv(d, 16, n, 1.0f, rng);
  const std::vector<float> q = RandomQueries(n, g_heads, d, 2.0f, rng);
  const float scale = 0.125f;
  for (const NamedKernel& k : Kernels(d)) {
    const Kernel kernel = k.kernel;
    const std::vector<float> whole = RunKernel(kernel, q, g_heads, kv, 0, n, scale);
    std::vector<float> chunked(whole.size());
    const int32_t sizes[] = {1, 7, 16, 45, 2, 100, 129, 250, 150};
    int32_t first = 0;
    for (int32_t size : sizes) {
      const int32_t len = std::min(size, n - first);
      const std::vector<float> qc(q.begin() + static_cast<size_t>(first) * g_heads * d,
                                  q.begin() + static_cast<size_t>(first + len) * g_heads * d);
      const std::vector<float> part = RunKernel(kernel, qc, g_heads, kv, first, len, scale);
      std::copy(part.begin(), part.end(), chunked.begin() + static_cast<size_t>(first) * g_heads * d);
      first += len;
    }
    ASSERT_EQ(first, n);
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_TRUE(SameBits(&whole[i], &chunked[i], 1))
          << k.name << " element " << i << " (token " << i / (g_heads * d) << "): " << whole[i] << " vs " << chunked[i];
    }
  }
}

// A decode step (PagedAttention: one token, with the probabilities a policy
// observes, on its own keys-in-lanes kernel) gives a token the same bits as
// prefilling it, and probabilities that match the reference softmax.
struct DecodeCase {
  int head_dim, g_heads, block_size;
};

class DecodeStepTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeStepTest, EqualsPrefillBits) {
  const DecodeCase& p = GetParam();
  std::mt19937 rng(5 + p.head_dim + p.g_heads);
  const int d = p.head_dim, g_heads = p.g_heads;
  const int32_t n = 600;  // 1 to 600 keys: every tile count, ragged last tiles, three key segments
  PagedHead kv(d, p.block_size, n, 1.0f, rng);
  const std::vector<float> q = RandomQueries(n, g_heads, d, 2.0f, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const std::vector<float> whole = RunKernel(&PrefillAttention, q, g_heads, kv, 0, n, scale);
  const size_t row = static_cast<size_t>(g_heads) * d;
  std::vector<float> out(row), probs;
  for (int32_t i = 0; i < n; ++i) {
    probs.assign(static_cast<size_t>(g_heads) * (i + 1), -1.0f);
    PagedAttention(&q[i * row], g_heads, kv.View(), i + 1, scale, probs.data(), out.data());
    ASSERT_TRUE(SameBits(out.data(), &whole[i * row], row)) << "token " << i;
    for (int g = 0; g < g_heads; ++g) {
      std::vector<double> ref(i + 1);
      double mx = -1e300, sum = 0, max_abs = 0;
      for (int32_t s = 0; s <= i; ++s) {
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += static_cast<double>(q[i * row + g * d + c]) * kv.Key(s)[c];
        ref[s] = scale * dot;
        mx = std::max(mx, ref[s]);
        max_abs = std::max(max_abs, std::fabs(ref[s]));
      }
      for (double& x : ref) sum += (x = std::exp(x - mx));
      const double tol = kUlps * std::ldexp(1.0, -24) * (1 + max_abs);  // probabilities are <= 1
      for (int32_t s = 0; s <= i; ++s) {
        ASSERT_NEAR(probs[g * (i + 1) + s], ref[s] / sum, tol) << "token " << i << " head " << g << " slot " << s;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeStepTest,
                         ::testing::Values(DecodeCase{64, 3, 16},    // the default model
                                           DecodeCase{64, 1, 5},     // MHA, keys of a tile in several blocks
                                           DecodeCase{128, 4, 16},   // one full row pass
                                           DecodeCase{96, 5, 8},     // a 32-column value block, two row passes
                                           DecodeCase{48, 8, 16},    // head dim < 64
                                           DecodeCase{40, 3, 16}));  // head dim % 16 != 0: the prefill kernel

// A token's output depends on slots up to its own only: rewriting every
// later slot (as a later chunk of the prompt would) changes nothing.
TEST(PrefillAttentionChunking, LaterSlotsDoNotMatter) {
  std::mt19937 rng(11);
  const int d = 64, g_heads = 3;
  const int32_t n = 90;
  PagedHead kv(d, 16, n, 1.0f, rng);
  const std::vector<float> q = RandomQueries(n, g_heads, d, 1.0f, rng);
  const std::vector<float> before = RunKernel(&PrefillAttention, q, g_heads, kv, 0, n, 0.125f);
  const int32_t last = 40;  // tokens 0..40 keep their outputs
  for (int32_t s = last + 1; s < n; ++s) {
    for (int c = 0; c < d; ++c) kv.Key(s)[c] = 1e3f, kv.Value(s)[c] = 1e3f;
  }
  const std::vector<float> after = RunKernel(&PrefillAttention, q, g_heads, kv, 0, n, 0.125f);
  const size_t kept = static_cast<size_t>(last + 1) * g_heads * d;
  EXPECT_TRUE(SameBits(before.data(), after.data(), kept));
  EXPECT_FALSE(SameBits(before.data() + kept, after.data() + kept, before.size() - kept));
}

// A running max that moves by a lot between key tiles: the first keys score
// low and later ones ever higher, so every tile rescales what came before.
TEST(PrefillAttentionChunking, RescalesWhenTheMaxMoves) {
  std::mt19937 rng(3);
  const int d = 64, g_heads = 3;
  const int32_t n = 200;
  PagedHead kv(d, 16, n, 1.0f, rng);
  for (int32_t s = 0; s < n; ++s) {
    for (int c = 0; c < d; ++c) kv.Key(s)[c] = 0.03f * (s - 60) * (c % 2 == 0 ? 1.0f : 0.5f);
  }
  std::vector<float> q(static_cast<size_t>(n) * g_heads * d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = (i % 2 == 0 ? 1.0f : 0.5f) * (1.0f + 0.001f * (i % 7));
  const float scale = 0.125f;
  const Expected ref = Reference(q, g_heads, kv, 0, n, scale);
  for (const NamedKernel& k : Kernels(d)) ExpectNear(RunKernel(k.kernel, q, g_heads, kv, 0, n, scale), ref, d, k.name);
}

}  // namespace
}  // namespace beacon
