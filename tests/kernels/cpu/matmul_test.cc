// MatMul against a scalar reference built on DequantizeRow (the scalar
// dequantiser): for quantised weights the reference uses the same int8
// activations the kernel multiplies with, so the two agree up to float
// summation order; a second check bounds the error against f32 activations.
#include "kernels/cpu/matmul.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/matmul_tiled.h"

namespace beacon {
namespace {

std::vector<uint8_t> RandomMatrix(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> bytes(DTypeRowBytes(t, cols) * rows);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t n = rows * cols;
  switch (t) {
    case DType::kF32: {
      auto* p = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = u(rng);
      break;
    }
    case DType::kF16:
    case DType::kBF16: {
      auto* p = reinterpret_cast<uint16_t*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = t == DType::kF16 ? Fp32ToFp16(u(rng)) : Fp32ToBf16(u(rng));
      break;
    }
    default: {
      // Random quantised payload with sane fp16 scales in every block: d at
      // `d_off`, and the second fp16 (Q4_1/Q5_1 m, K-quant dmin) after it.
      for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
      const size_t bb = DTypeBlockBytes(t);
      size_t d_off = 0;
      if (t == DType::kQ2_K) d_off = 80;
      if (t == DType::kQ3_K) d_off = 108;
      if (t == DType::kQ6_K) d_off = 208;
      // K-quant sub-block scales multiply d (up to 63, or 127 for Q6_K).
      const float d_scale = IsKQuant(t) ? 1.0f / 32 : 1.0f;
      for (size_t off = 0; off < bytes.size(); off += bb) {
        const uint16_t d = Fp32ToFp16(d_scale * (0.01f + 0.05f * std::fabs(u(rng))));
        std::memcpy(&bytes[off + d_off], &d, 2);
        if (t == DType::kQ4_1 || t == DType::kQ5_1) {
          const uint16_t m = Fp32ToFp16(-0.4f * std::fabs(u(rng)));
          std::memcpy(&bytes[off + 2], &m, 2);
        }
        if (t == DType::kQ2_K || t == DType::kQ4_K || t == DType::kQ5_K) {
          const uint16_t dmin = Fp32ToFp16(d_scale * 0.3f * std::fabs(u(rng)));
          std::memcpy(&bytes[off + d_off + 2], &dmin, 2);
        }
      }
    }
  }
  return bytes;
}

class MatMulTest : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(MatMulTest, MatchesScalarReference) {
  const auto [dtype, n_tokens] = GetParam();
  std::mt19937 rng(1234 + static_cast<int>(dtype) * 100 + n_tokens);
  const int64_t rows = 77, cols = 512;
  std::vector<uint8_t> w = RandomMatrix(dtype, rows, cols, rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n_tokens * cols);
  for (float& v : x) v = nd(rng);
  const bool quant = IsQuantized(dtype);

  // The activations the integer kernel sees: d * q per block.
  QuantizedRows xq;
  QuantizeRowsQ8(x.data(), n_tokens, cols, &xq);
  std::vector<float> x_eff(x);
  if (quant) {
    for (int64_t i = 0; i < n_tokens * cols; ++i) x_eff[i] = xq.d[i / 32] * xq.q[i];
  }

  ThreadPool pool(2);
  QuantizedRows scratch;
  std::vector<float> y(n_tokens * rows, NAN), y1(n_tokens * rows, NAN);
  MatMul(MatrixView{dtype, rows, cols, w.data()}, x.data(), n_tokens, y.data(), &pool, &scratch);
  MatMul(MatrixView{dtype, rows, cols, w.data()}, x.data(), n_tokens, y1.data(), nullptr, &scratch);
  // The repacked 16-row kernel (where this build has it) on the same matrix:
  // 77 rows leave a partial last group.
  std::vector<float> yp(n_tokens * rows, NAN);
  std::unique_ptr<PackedMatrix> packed;
  if (PackedMatrix::Supported(dtype)) {
    packed = PackedMatrix::Pack(dtype, rows, cols, w.data());
    MatrixView pv{dtype, rows, cols, w.data(), packed.get()};
    MatMul(pv, x.data(), n_tokens, yp.data(), &pool, &scratch);
  }

  std::vector<float> wrow(cols);
  double max_rel_exact = 0, err2 = 0, ref2 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(dtype, w.data() + DTypeRowBytes(dtype, cols) * r, wrow.data(), cols);
    for (int t = 0; t < n_tokens; ++t) {
      double exact = 0, f32 = 0, scale = 0;
      for (int64_t c = 0; c < cols; ++c) {
        exact += static_cast<double>(wrow[c]) * x_eff[t * cols + c];
        f32 += static_cast<double>(wrow[c]) * x[t * cols + c];
        scale += std::fabs(static_cast<double>(wrow[c]) * x[t * cols + c]);
      }
      const float got = y[t * rows + r];
      ASSERT_EQ(got, y1[t * rows + r]) << "threaded and single-threaded results differ";
      if (packed) {
        ASSERT_LT(std::fabs(yp[t * rows + r] - exact) / scale, 1e-5) << "packed kernel, row " << r << " token " << t;
        // The group-format kernels evaluate one expression in one order
        // (matmul_group.h): packed and per-row agree bit for bit.
        if (HasGroupFormat(dtype)) {
          ASSERT_EQ(yp[t * rows + r], got) << "packed vs per-row, row " << r;
        }
      }
      max_rel_exact = std::max(max_rel_exact, std::fabs(got - exact) / scale);
      err2 += (got - f32) * (got - f32);
      ref2 += f32 * f32;
    }
  }
  // Same inputs as the kernel: only float summation order differs.
  EXPECT_LT(max_rel_exact, 1e-5) << DTypeName(dtype);
  // Against f32 activations: the int8 rounding of activations (quantised
  // types only) costs well under 1% relative RMS.
  EXPECT_LT(std::sqrt(err2 / ref2), quant ? 1e-2 : 1e-5) << DTypeName(dtype);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                                              DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                                              DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                                                              DType::kQ6_K),
                                            ::testing::Values(1, 3, 4, 5, 17)));

TEST(QuantizeRowsQ8, RoundTripWithinHalfStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(5 * 64);
  for (float& v : x) v = nd(rng);
  x[3] = 0.0f;
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
  QuantizedRows q;
  QuantizeRowsQ8(x.data(), 5, 64, &q);
  for (size_t i = 0; i < x.size(); ++i) {
    const float d = q.d[i / 32];
    EXPECT_LE(std::fabs(d * q.q[i] - x[i]), d / 2 + 1e-6f) << i;
  }
  for (size_t b = 0; b < q.d.size(); ++b) {
    int s = 0;
    for (int j = 0; j < 32; ++j) s += q.q[b * 32 + j];
    EXPECT_FLOAT_EQ(q.sum[b], q.d[b] * s);
  }
  EXPECT_EQ(q.d[2], 0.0f);
}

}  // namespace
}  // namespace beacon

namespace beacon {
namespace {

// The tiled f32 path and the vectorised dequantiser on every type, called
// directly (MatMul routes only float types to it).
TEST(MatMulRowsTiled, MatchesF32ReferenceForEveryType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                  DType::kQ5_1, DType::kQ4_K, DType::kQ6_K}) {
    std::mt19937 rng(99);
    const int64_t rows = 13, cols = IsKQuant(t) ? 256 : 96, n_tokens = 6;
    std::vector<uint8_t> w = RandomMatrix(t, rows, cols, rng);
    std::vector<float> x(n_tokens * cols), y(n_tokens * rows, NAN), wrow(cols), fast(cols);
    std::normal_distribution<float> nd;
    for (float& v : x) v = nd(rng);
    MatMulRowsTiled(MatrixView{t, rows, cols, w.data()}, x.data(), n_tokens, 0, rows, y.data(), rows);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t, w.data() + DTypeRowBytes(t, cols) * r, wrow.data(), cols);
      DequantizeRowFast(t, w.data() + DTypeRowBytes(t, cols) * r, fast.data(), cols);
      for (int64_t c = 0; c < cols; ++c) ASSERT_NEAR(fast[c], wrow[c], 1e-6f * std::fabs(wrow[c]) + 1e-12f);
      for (int64_t tk = 0; tk < n_tokens; ++tk) {
        double ref = 0, scale = 0;
        for (int64_t c = 0; c < cols; ++c) {
          ref += static_cast<double>(wrow[c]) * x[tk * cols + c];
          scale += std::fabs(static_cast<double>(wrow[c]) * x[tk * cols + c]);
        }
        EXPECT_LT(std::fabs(y[tk * rows + r] - ref) / scale, 1e-5) << DTypeName(t) << " row " << r;
      }
    }
  }
}

// The tiled path's exact arithmetic with AVX-512 (issue 34): each (row,
// token) sum is 16 per-lane FMA chains over the columns, then the lanes
// added in the pairs _mm512_reduce_add_ps uses, (l, l + 8), (l, l + 4),
// (l, l + 2), (l, l + 1). The tile's one-shuffle reduction must give these
// bits exactly (eviction scores and the f32 layers rely on the results not
// moving); a wrong pairing or lane order fails here, not within a tolerance.
// Rows 13 and tokens 7 leave partial tiles both ways; d = 128 and 80 columns.
TEST(MatMulRowsTiled, SumsBitIdenticalToPerAccumulatorReduction) {
#if defined(__AVX512F__)
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int64_t cols : {128, 80}) {
    const int64_t rows = 13, n_tokens = 7, vec = cols / 16 * 16;
    std::vector<float> w(rows * cols), x(n_tokens * cols), y(n_tokens * rows, NAN);
    for (float& v : w) v = nd(rng);
    for (float& v : x) v = nd(rng);
    MatMulRowsTiled(MatrixView{DType::kF32, rows, cols, w.data()}, x.data(), n_tokens, 0, rows, y.data(), rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        float lane[16] = {};
        for (int64_t c = 0; c < vec; c += 16) {
          for (int l = 0; l < 16; ++l) lane[l] = std::fma(w[r * cols + c + l], x[t * cols + c + l], lane[l]);
        }
        for (int half = 8; half >= 1; half /= 2) {
          for (int l = 0; l < half; ++l) lane[l] = lane[l] + lane[l + half];
        }
        float want = lane[0];
        for (int64_t c = vec; c < cols; ++c) want += w[r * cols + c] * x[t * cols + c];
        EXPECT_EQ(y[t * rows + r], want) << "cols " << cols << " row " << r << " token " << t;
      }
    }
  }
#else
  GTEST_SKIP() << "built without AVX-512: the tiled path reduces each accumulator alone";
#endif
}

}  // namespace
}  // namespace beacon

namespace beacon {
namespace {

// The matrix kernels take tokens in tiles (packed: 16, 8 or 6; per-row: 4;
// then the rest as one tile of its size) and share each unpacked weight block
// among a tile's tokens; a token's arithmetic must not depend on which tile it
// fell in. Every
// batch size from 1 to 19 (each remainder of every tile width), every token
// against the same token multiplied alone, bit for bit: a server's output
// must not change with the number of requests it happens to batch.
TEST(PackedMatrix, ResultsDoNotDependOnTheBatch) {
  for (DType t : {DType::kQ4_1, DType::kQ8_0, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K}) {
    std::mt19937 rng(33 + static_cast<int>(t));
    const int64_t rows = 35, cols = 512, max_n = 19;
    std::vector<uint8_t> w = RandomMatrix(t, rows, cols, rng);
    // Without AVX-512 VNNI (no packed kernel) the per-row kernel alone.
    std::unique_ptr<PackedMatrix> packed;
    if (PackedMatrix::Supported(t)) packed = PackedMatrix::Pack(t, rows, cols, w.data());
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(max_n * cols);
    for (float& v : x) v = nd(rng);
    QuantizedRows scratch;
    // The packed kernel, and the per-row kernel (the GGUF layout: what a
    // machine without AVX-512 VNNI runs) on the same matrix unpacked.
    std::vector<const PackedMatrix*> kernels = {nullptr};
    if (packed != nullptr) kernels.insert(kernels.begin(), packed.get());
    for (const PackedMatrix* p : kernels) {
      const MatrixView view{t, rows, cols, w.data(), p};
      const char* kernel = p != nullptr ? "packed" : "per-row";
      std::vector<float> alone(max_n * rows);
      for (int64_t tk = 0; tk < max_n; ++tk) {
        MatMul(view, x.data() + tk * cols, 1, alone.data() + tk * rows, nullptr, &scratch);
      }
      for (int64_t n = 1; n <= max_n; ++n) {
        std::vector<float> y(n * rows, NAN);
        MatMul(view, x.data(), n, y.data(), nullptr, &scratch);
        for (int64_t i = 0; i < n * rows; ++i) {
          ASSERT_EQ(y[i], alone[i]) << DTypeName(t) << " " << kernel << " batch " << n << " token " << i / rows
                                    << " row " << i % rows;
        }
      }
    }
  }
}

// Packing on a pool (groups of 16 rows per task) writes the same bytes as
// packing inline, for every packable type and a partial last group.
TEST(PackedMatrix, PoolPackingIsIdentical) {
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_1, DType::kQ8_0, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K}) {
    if (!PackedMatrix::Supported(t)) GTEST_SKIP() << "no AVX-512 VNNI in this build";
    std::mt19937 rng(21);
    const int64_t rows = 83, cols = 512;
    std::vector<uint8_t> w = RandomMatrix(t, rows, cols, rng);
    std::unique_ptr<PackedMatrix> a = PackedMatrix::Pack(t, rows, cols, w.data());
    std::unique_ptr<PackedMatrix> b = PackedMatrix::Pack(t, rows, cols, w.data(), &pool);
    ASSERT_EQ(a->bytes(), b->bytes()) << DTypeName(t);
    EXPECT_EQ(std::memcmp(a->group(0), b->group(0), a->bytes()), 0) << DTypeName(t);
  }
}

}  // namespace
}  // namespace beacon
