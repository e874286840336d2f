#include "kernels/cpu/ops.h"

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/thread_pool.h"

namespace beacon {
namespace {

TEST(Ops, RmsNormMatchesFormula) {
  std::vector<float> x = {1, -2, 3, 0.5f}, w = {1, 2, 0.5f, -1}, out(4);
  RmsNorm(x.data(), w.data(), 4, 1e-5f, out.data());
  const double ms = (1 + 4 + 9 + 0.25) / 4.0;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], x[i] / std::sqrt(ms + 1e-5) * w[i], 1e-6);
}

TEST(Ops, RopeRotatesTheRightPairs) {
  std::vector<float> inv(4);
  RopeInvFreq(10000.0f, 8, inv.data());
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[1], std::pow(10000.0, -0.25), 1e-7);
  const std::vector<float> x0 = {1, 2, 3, 4, 5, 6, 7, 8};
  for (bool interleaved : {true, false}) {
    std::vector<float> x = x0;
    Rope(x.data(), 8, 3, inv.data(), interleaved);
    for (int i = 0; i < 4; ++i) {
      const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + 4;
      const double ang = 3.0 * inv[i];
      EXPECT_NEAR(x[a], x0[a] * std::cos(ang) - x0[b] * std::sin(ang), 1e-5);
      EXPECT_NEAR(x[b], x0[a] * std::sin(ang) + x0[b] * std::cos(ang), 1e-5);
    }
    std::vector<float> same = x0;
    Rope(same.data(), 8, 0, inv.data(), interleaved);
    EXPECT_EQ(same, x0);  // position 0 is the identity
  }
}

TEST(Ops, SoftmaxSumsToOneAndIsStable) {
  std::vector<float> x = {1000, 1001, 999, -INFINITY};
  SoftmaxInPlace(x.data(), 4);
  EXPECT_NEAR(x[0] + x[1] + x[2] + x[3], 1.0, 1e-6);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_GT(x[1], x[0]);
}

// The vectorised softmax of the KV scoring against the scalar one (a double
// reference): every length around the 16-lane boundaries, -inf masked
// entries exactly 0, wide ranges underflowing to exactly 0.
TEST(Ops, SoftmaxInPlaceFastMatchesTheReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  for (int n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 705}) {
    std::vector<float> x(n);
    for (float& v : x) v = u(rng);
    if (n > 3) x[2] = -INFINITY;
    std::vector<float> fast = x, scalar = x;
    SoftmaxInPlaceFast(fast.data(), n);
    SoftmaxInPlace(scalar.data(), n);
    double mx = -INFINITY;
    for (float v : x) mx = std::max(mx, static_cast<double>(v));
    double sum = 0;
    for (float v : x) sum += std::exp(static_cast<double>(v) - mx);
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]) - mx) / sum;
      if (x[i] - mx < -87.3) {
        EXPECT_EQ(fast[i], 0.0f) << n << " " << i;  // underflow (and -inf) is exactly 0
      } else {
        // x - max rounds in f32 (|x - max| up to 60: ~4e-6 relative after
        // exp), as in the scalar softmax; the exponential itself adds < 2e-7.
        EXPECT_NEAR(fast[i], want, 1e-5 * want) << n << " " << i;
        EXPECT_NEAR(fast[i], scalar[i], 1e-6 * scalar[i]) << n << " " << i;
      }
      total += fast[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << n;
  }
}

TEST(Ops, SiluMul) {
  std::vector<float> g = {-1, 0, 2}, u = {2, 3, 0.5f};
  SiluMul(g.data(), u.data(), 3);
  EXPECT_NEAR(g[0], -1 / (1 + std::exp(1.0)) * 2, 1e-6);
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_NEAR(g[2], 2 / (1 + std::exp(-2.0)) * 0.5, 1e-6);
}

// The vector path (16 lanes) against double precision, over the range
// activations take and the extremes (exp underflow, large positive gates).
TEST(Ops, SiluMulVectorPathMatchesDouble) {
  std::vector<float> g, u;
  for (int i = 0; i < 1000; ++i) {
    g.push_back(-30.0f + 0.06f * static_cast<float>(i));
    u.push_back(0.5f + 0.001f * static_cast<float>(i % 37));
  }
  for (float extreme : {-200.0f, -88.0f, -87.0f, -1e-4f, 0.0f, 1e-4f, 60.0f, 200.0f}) {
    g.push_back(extreme);
    u.push_back(1.0f);
  }
  std::vector<float> out = g;
  SiluMul(out.data(), u.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i], want = x / (1.0 + std::exp(-x)) * u[i];
    EXPECT_NEAR(out[i], want, 2e-6 * std::fabs(want) + 1e-30) << "g=" << g[i];
  }
}

// Paged attention equals a naive loop over contiguous keys, whatever the
// block order in the table.
// head_dim 16 takes the generic path; 64 and 128 the AVX-512 one.
class AttentionTest : public ::testing::TestWithParam<int> {};

TEST_P(AttentionTest, PagedMatchesNaive) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  const int d = GetParam(), G = 3, bs = 4, n_keys = 13, n_blocks = 6;
  std::vector<float> kstore(n_blocks * bs * d), vstore(n_blocks * bs * d);
  for (float& v : kstore) v = nd(rng);
  for (float& v : vstore) v = nd(rng);
  const std::vector<int32_t> table = {5, 2, 0, 3};  // logical block -> physical
  std::vector<float> q(G * d), out(G * d), scores(G * n_keys);
  for (float& v : q) v = nd(rng);
  PagedHeadView view{kstore.data(), vstore.data(), static_cast<size_t>(bs * d), table.data(), bs, d};
  const float scale = 0.25f;
  PagedAttention(q.data(), G, view, n_keys, scale, scores.data(), out.data());
  for (int g = 0; g < G; ++g) {
    std::vector<double> p(n_keys);
    double mx = -1e30, sum = 0;
    for (int s = 0; s < n_keys; ++s) {
      const float* k = &kstore[(table[s / bs] * bs + s % bs) * d];
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += q[g * d + i] * k[i];
      p[s] = dot * scale;
      mx = std::max(mx, p[s]);
    }
    for (double& v : p) sum += (v = std::exp(v - mx));
    for (int i = 0; i < d; ++i) {
      double o = 0;
      for (int s = 0; s < n_keys; ++s) o += p[s] / sum * vstore[(table[s / bs] * bs + s % bs) * d + i];
      EXPECT_NEAR(out[g * d + i], o, 1e-5);
    }
    for (int s = 0; s < n_keys; ++s) EXPECT_NEAR(scores[g * n_keys + s], p[s] / sum, 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, AttentionTest, ::testing::Values(16, 64, 128));

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<std::atomic<int>> hits(1000);
    pool.ParallelFor(1000, 7, [&](int64_t b, int64_t e, int thread) {
      ASSERT_GE(thread, 0);
      ASSERT_LT(thread, 2);
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

}  // namespace
}  // namespace beacon
