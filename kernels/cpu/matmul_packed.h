// The integer kernel over PackedMatrix weights (internal to kernels/cpu):
// Y[t][r] = sum_c W[r][c] * (d * q)[t][c] for the rows of groups
// [g_begin, g_end), with the activations quantised as QuantizeRowsQ8 does.
// Computes the same products as the per-row int8 kernel in matmul.cc; only
// the order of float additions differs. REQUIRES PackedMatrix::Supported.
#ifndef BEACON_KERNELS_CPU_MATMUL_PACKED_H_
#define BEACON_KERNELS_CPU_MATMUL_PACKED_H_

#include <cstdint>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"

namespace beacon {

// y has row stride y_stride (>= w.rows()); row r of token t is y[t * y_stride + r].
void MatMulPackedGroups(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin,
                        int64_t g_end, float* y, int64_t y_stride);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_MATMUL_PACKED_H_
