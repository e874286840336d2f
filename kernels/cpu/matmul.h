// Y = X W^T for a weight matrix in any supported DType and a batch of f32
// activation rows: Y[t][r] = sum_c W[r][c] * X[t][c].
//
// Quantised weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K..Q6_K)
// are multiplied with integer dot products: each activation row is quantised to int8 per block of 32 (scale
// d = max|x| / 127), as llama.cpp does, so results differ from an f32 product
// by that rounding (relative error ~0.3% on typical rows). Float weights (F32,
// F16, BF16) use f32 FMA with the activations unchanged.
//
// Work is split over rows of W (so each weight byte is read once per call,
// whatever the batch size) and, within a row range, tokens are processed in
// tiles so a decoded weight block is reused for several tokens.
#ifndef BEACON_KERNELS_CPU_MATMUL_H_
#define BEACON_KERNELS_CPU_MATMUL_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/thread_pool.h"

namespace beacon {

// A weight matrix as the kernel sees it: `rows` rows of `cols` elements,
// rows contiguous, each DTypeRowBytes(dtype, cols) bytes.
struct MatrixView {
  DType dtype;
  int64_t rows;
  int64_t cols;
  const void* data;
  // The same matrix repacked for the 16-row integer kernel, when the caller
  // made one (packed_matrix.h); then it is used for every batch width.
  const PackedMatrix* packed = nullptr;
};

// Activation rows quantised to int8 per block of 32 for the integer kernels.
struct QuantizedRows {
  int64_t n_rows = 0;
  int64_t cols = 0;
  std::vector<int8_t> q;   // [n_rows][cols]
  std::vector<float> d;    // [n_rows][cols / 32]: block scale
  std::vector<float> sum;  // [n_rows][cols / 32]: d * sum(q), for offset terms
  // [n_rows][cols / 16]: sum(q) over each 16 elements, for the integer
  // zero-point and min terms of the group-format types (kquant_blocks.h).
  std::vector<int32_t> isum16;
};

// Float weights (F32, F16, BF16): from this many activation rows on, MatMul
// converts weight tiles to f32 once and runs register-tiled FMAs
// (matmul_tiled.h) instead of one dot product per (row, token).
// Quantised weights always take the integer kernels (packed 16-row when the
// CPU has AVX-512 VNNI, else per row): a token's result then never depends on
// the batch it shares a step with. (Requantising activations to int8 at
// every layer makes the model sensitive to the last bit: summation orders
// that differ by batch width would change logits by several percent.)
inline constexpr int64_t kTiledMinTokens = 4;
bool MatMulIsTiled(DType w, int64_t n_tokens);

// REQUIRES cols % 32 == 0.
void QuantizeRowsQ8(const float* x, int64_t n_rows, int64_t cols, QuantizedRows* out);

// Y[n_tokens][w.rows] = X[n_tokens][w.cols] * W^T. `scratch` holds the
// quantised activations between calls (reused to avoid allocation).
// REQUIRES w.cols % 32 == 0 for quantised types; Y does not alias X.
void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool, QuantizedRows* scratch);

// Same, but over only rows [row_begin, row_end) of W, single-threaded, writing
// Y[t][r - row_begin] with row stride `y_stride`. Exposed for tests and for
// callers that parallelise differently.
void MatMulRows(const MatrixView& w, const float* x, const QuantizedRows* xq, int64_t n_tokens, int64_t row_begin,
                int64_t row_end, float* y, int64_t y_stride);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_MATMUL_H_
