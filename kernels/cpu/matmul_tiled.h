// The wide-batch path of MatMul (internal to kernels/cpu).
//
// With several activation rows, the int8 dot-product kernel pays its
// per-block scale arithmetic once per (block, token). This path instead
// dequantises a tile of weight rows to f32 once (thread-local scratch, L1
// resident) and multiplies it with every activation row in 4x4 register tiles
// of f32 FMAs, so the per-token cost is pure FMA throughput.
//
// For quantised weights the caller passes the activations *as the int8 kernel
// sees them* (d * q per block): both paths then compute the same products and
// differ only in float summation order (~1e-6 relative), so a sequence's
// logits do not depend on how many other tokens share its batch.
#ifndef BEACON_KERNELS_CPU_MATMUL_TILED_H_
#define BEACON_KERNELS_CPU_MATMUL_TILED_H_

#include <cstdint>

#include "kernels/cpu/matmul.h"

namespace beacon {

// Rows of W handled per dequantised tile; row ranges given to
// MatMulRowsTiled should be multiples of it (except at the end) for speed.
inline constexpr int kTiledRowTile = 4;

// Y[t][r - row_begin] (row stride y_stride) for rows [row_begin, row_end).
void MatMulRowsTiled(const MatrixView& w, const float* x, int64_t n_tokens, int64_t row_begin,
                     int64_t row_end, float* y, int64_t y_stride);

// Vectorised DequantizeRow (equal up to the last bit: FMA contraction).
void DequantizeRowFast(DType t, const void* src, float* dst, int64_t n);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_MATMUL_TILED_H_
