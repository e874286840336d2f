// The wide-batch path of MatMul (internal to kernels/cpu).
//
// With several activation rows, a per-(row, token) dot product re-converts
// every weight once per token. This path converts a tile of weight rows to
// f32 once (thread-local scratch, L1 resident) and multiplies it with every
// activation row in 4x4 register tiles of f32 FMAs, so the per-token cost is
// pure FMA throughput. MatMul uses it for float weight types; it also accepts
// quantised types (DequantizeRowFast), for callers that want f32 products.
#ifndef BEACON_KERNELS_CPU_MATMUL_TILED_H_
#define BEACON_KERNELS_CPU_MATMUL_TILED_H_

#include <cstdint>

#include "kernels/cpu/matmul.h"

namespace beacon {

// Rows of W handled per dequantised tile; row ranges given to
// MatMulRowsTiled should be multiples of it (except at the end) for speed.
inline constexpr int kTiledRowTile = 4;

// Y[t][r - row_begin] (row stride y_stride) for rows [row_begin, row_end).
void MatMulRowsTiled(const MatrixView& w, const float* x, int64_t n_tokens, int64_t row_begin, int64_t row_end,
                     float* y, int64_t y_stride);

// Vectorised DequantizeRow (equal up to the last bit: FMA contraction).
void DequantizeRowFast(DType t, const void* src, float* dst, int64_t n);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_MATMUL_TILED_H_
