// The segmented decode step (attention.h): segments computed in any order,
// on any thread, then merged, give exactly PagedAttention's output and
// probabilities; the segment count follows kAttentionSegment; and the
// merged result is the softmax a naive double loop computes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/prefill_attention.h"

namespace beacon {
namespace attention_segments_test {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

TEST(AttentionSegments, CountFollowsTheSegmentLength) {
  EXPECT_EQ(AttentionSegments(1), 1);
  EXPECT_EQ(AttentionSegments(kAttentionSegment), 1);
  EXPECT_EQ(AttentionSegments(kAttentionSegment + 1), 2);
  EXPECT_EQ(AttentionSegments(4 * kAttentionSegment), 4);
  EXPECT_EQ(kAttentionSegment % 64, 0) << "segments must start on the decode kernel's key groups";
  EXPECT_EQ(AttentionPartialFloats(3, 64), 3u * 66);
}

// The segment functions of this build (what CpuBackend runs), and the AVX2
// kernel's by name (what a build without AVX-512 runs; on AVX-512 machines
// only this test and prefill_attention_test.cc run it).
struct SegmentKernel {
  const char* name;
  bool (*supported)(int head_dim);
  void (*segment)(const float*, int, const PagedHeadView&, int32_t, int32_t, float, float*, float*);
  void (*merge)(const float*, int, int, int32_t, float*, float*);
};

// The whole step of one token: PagedAttention, or for the AVX2 kernel its
// prefill of one token (the same segments, folded on this thread).
void Whole(const SegmentKernel& k, const float* q, int g, const PagedHeadView& view, int32_t n, float scale,
           float* probs, float* out) {
  if (k.segment == &PagedAttentionSegment) return PagedAttention(q, g, view, n, scale, probs, out);
  PrefillQueries qs;
  qs.q = q;
  qs.q_token_stride = static_cast<int64_t>(g) * view.head_dim;
  qs.out = out;
  qs.out_token_stride = qs.q_token_stride;
  qs.n_q_heads = g;
  qs.first_slot = n - 1;
  qs.n_tokens = 1;
  PrefillAttentionAvx2(qs, view, scale, probs);
}

class AttentionSegmentsTest : public ::testing::TestWithParam<SegmentKernel> {};

TEST_P(AttentionSegmentsTest, AnyOrderAnyThreadMergesToTheWholeStep) {
  const SegmentKernel& k = GetParam();
  if (!k.supported(64)) GTEST_SKIP() << k.name << ": not in this build";
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  const int d = 64, g = 3, bs = 16;
  for (DType t : {DType::kF32, DType::kBF16}) {
    for (int32_t n : {1, 255, 256, 257, 700, 1100}) {
      const int32_t blocks = (n + bs - 1) / bs;
      std::vector<int32_t> table(blocks);
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);
      std::vector<float> k32(static_cast<size_t>(blocks) * bs * d), v32(k32.size());
      std::vector<uint16_t> k16(k32.size()), v16(k32.size());
      for (size_t i = 0; i < k32.size(); ++i) {
        k16[i] = Fp32ToBf16(k32[i] = 2.0f * nd(rng));
        v16[i] = Fp32ToBf16(v32[i] = nd(rng));
      }
      PagedHeadView view;
      view.k_head_base = t == DType::kF32 ? static_cast<const void*>(k32.data()) : k16.data();
      view.v_head_base = t == DType::kF32 ? static_cast<const void*>(v32.data()) : v16.data();
      view.block_stride = static_cast<size_t>(bs) * d;
      view.block_ids = table.data();
      view.block_size = bs;
      view.head_dim = d;
      view.dtype = t;
      std::vector<float> q(g * d);
      for (float& x : q) x = nd(rng);
      const float scale = 0.125f;
      std::vector<float> want(g * d), want_p(static_cast<size_t>(g) * n);
      Whole(k, q.data(), g, view, n, scale, want_p.data(), want.data());

      // Segments in reverse order, alternately on two threads.
      const int32_t n_seg = AttentionSegments(n);
      const size_t stride = AttentionPartialFloats(g, d);
      std::vector<float> partials(stride * n_seg, std::nanf("")), probs(want_p.size(), std::nanf(""));
      std::vector<int32_t> order(n_seg);
      std::iota(order.rbegin(), order.rend(), 0);
      auto run = [&](int parity) {
        for (size_t i = parity; i < order.size(); i += 2) {
          k.segment(q.data(), g, view, n, order[i], scale, probs.data(), partials.data() + order[i] * stride);
        }
      };
      std::thread other(run, 1);
      run(0);
      other.join();
      std::vector<float> got(g * d);
      k.merge(partials.data(), g, d, n, probs.data(), got.data());
      ASSERT_TRUE(SameBits(got, want)) << "n=" << n;
      ASSERT_TRUE(SameBits(probs, want_p)) << "n=" << n;

      // And it is attention: a naive double-precision softmax.
      for (int h = 0; h < g; ++h) {
        std::vector<double> s(n);
        for (int32_t j = 0; j < n; ++j) {
          const size_t at = table[j / bs] * static_cast<size_t>(bs) * d + static_cast<size_t>(j % bs) * d;
          double dot = 0;
          for (int c = 0; c < d; ++c) {
            const double kc = t == DType::kF32 ? k32[at + c] : Bf16ToFp32(k16[at + c]);
            dot += q[h * d + c] * kc;
          }
          s[j] = scale * dot;
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int c = 0; c < d; ++c) {
          double o = 0;
          for (int32_t j = 0; j < n; ++j) {
            const size_t at = table[j / bs] * static_cast<size_t>(bs) * d + static_cast<size_t>(j % bs) * d;
            o += s[j] / sum * (t == DType::kF32 ? v32[at + c] : Bf16ToFp32(v16[at + c]));
          }
          ASSERT_NEAR(got[h * d + c], o, 2e-5) << "n=" << n << " head " << h;
        }
        for (int32_t j = 0; j < n; ++j) ASSERT_NEAR(probs[h * n + j], s[j] / sum, 2e-6);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionSegmentsTest,
                         ::testing::Values(SegmentKernel{"dispatched", &SegmentedAttentionSupported,
                                                         &PagedAttentionSegment, &MergeAttentionSegments},
                                           SegmentKernel{"avx2", &Avx2AttentionSupported, &PagedAttentionSegmentAvx2,
                                                         &MergeAttentionSegmentsAvx2}),
                         [](const ::testing::TestParamInfo<SegmentKernel>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace attention_segments_test
}  // namespace beacon
