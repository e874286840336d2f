// KeyBlockLogits against a double-precision loop over the same (bf16-rounded)
// keys: every block size up to a cache block, head sizes 64 and 128, query
// counts on and off the 8-query tile, a row stride wider than the block.
#include "kernels/cpu/key_logits.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

TEST(KeyBlockLogits, MatchesADoubleReference) {
  if (!KeyBlockLogitsSupported(DType::kF32, 128)) GTEST_SKIP() << "built without AVX-512";
  std::mt19937 rng(17);
  std::normal_distribution<float> nd;
  for (DType t : {DType::kF32, DType::kBF16}) {
    for (int d : {64, 128}) {
      for (int rows : {1, 5, 15, 16}) {
        for (int64_t nq : {1, 7, 8, 19}) {
          const int64_t ld = rows + 3;
          std::vector<float> keys_f(static_cast<size_t>(rows) * d), q(nq * d);
          std::vector<uint16_t> keys_b(keys_f.size());
          for (size_t i = 0; i < keys_f.size(); ++i) {
            keys_b[i] = Fp32ToBf16(nd(rng));
            keys_f[i] = t == DType::kBF16 ? Bf16ToFp32(keys_b[i]) : nd(rng);
          }
          for (float& v : q) v = nd(rng);
          std::vector<float> out(nq * ld, NAN);
          const void* keys = t == DType::kBF16 ? static_cast<const void*>(keys_b.data()) : keys_f.data();
          KeyBlockLogits(t, keys, rows, d, q.data(), nq, out.data(), ld);
          for (int64_t j = 0; j < nq; ++j) {
            for (int s = 0; s < ld; ++s) {
              if (s >= rows) {  // past the block: untouched
                EXPECT_TRUE(std::isnan(out[j * ld + s]));
                continue;
              }
              double want = 0, scale = 0;
              for (int c = 0; c < d; ++c) {
                const double p = static_cast<double>(q[j * d + c]) * keys_f[static_cast<size_t>(s) * d + c];
                want += p;
                scale += std::fabs(p);
              }
              EXPECT_LE(std::fabs(out[j * ld + s] - want), 1e-6 * scale + 1e-30)
                  << DTypeName(t) << " d " << d << " rows " << rows << " queries " << nq << " (" << j << ", " << s
                  << ")";
            }
          }
        }
      }
    }
  }
}

// The bf16 kernel against a double loop over the same bf16 operands (the
// queries rounded by Fp32ToBf16Row as the caller does): the products are
// exact, so only the f32 sums differ, by the same bound as above.
TEST(KeyBlockLogits, Bf16MatchesADoubleReferenceOverBf16Operands) {
  if (!KeyBlockLogitsBf16Supported(128)) GTEST_SKIP() << "built without AVX-512 BF16";
  std::mt19937 rng(19);
  std::normal_distribution<float> nd;
  for (int d : {64, 128}) {
    for (int rows : {1, 5, 15, 16}) {
      for (int64_t nq : {1, 7, 8, 19}) {
        const int64_t ld = rows + 3;
        std::vector<uint16_t> keys(static_cast<size_t>(rows) * d), qb(nq * d);
        std::vector<float> q(nq * d);
        for (uint16_t& k : keys) k = Fp32ToBf16(nd(rng));
        for (float& v : q) v = 3.0f * nd(rng);
        Fp32ToBf16Row(q.data(), nq * d, qb.data());
        std::vector<float> out(nq * ld, NAN);
        KeyBlockLogitsBf16(keys.data(), rows, d, qb.data(), nq, out.data(), ld);
        for (int64_t j = 0; j < nq; ++j) {
          for (int s = 0; s < ld; ++s) {
            if (s >= rows) {
              EXPECT_TRUE(std::isnan(out[j * ld + s]));
              continue;
            }
            double want = 0, scale = 0;
            for (int c = 0; c < d; ++c) {
              const double p =
                  static_cast<double>(Bf16ToFp32(qb[j * d + c])) * Bf16ToFp32(keys[static_cast<size_t>(s) * d + c]);
              want += p;
              scale += std::fabs(p);
            }
            EXPECT_LE(std::fabs(out[j * ld + s] - want), 1e-6 * scale + 1e-30)
                << "d " << d << " rows " << rows << " queries " << nq << " (" << j << ", " << s << ")";
          }
        }
      }
    }
  }
}

TEST(KeyBlockLogits, SupportIsWhatTheKernelHandles) {
  EXPECT_FALSE(KeyBlockLogitsSupported(DType::kQ8_0, 128));
  EXPECT_FALSE(KeyBlockLogitsSupported(DType::kF32, 72));
  EXPECT_FALSE(KeyBlockLogitsSupported(DType::kF32, 1024));
  EXPECT_FALSE(KeyBlockLogitsBf16Supported(48)) << "pairs in whole vectors only";
  EXPECT_FALSE(KeyBlockLogitsBf16Supported(1024));
}

}  // namespace
}  // namespace beacon
