// Integer kernels for the group-format types (Q5_0, Q5_1, Q2_K..Q6_K;
// kquant_blocks.h), internal to kernels/cpu: MatMul dispatches here.
//
// Both compute, per weight row and token, with the activations quantised as
// QuantizeRowsQ8 does (int8 q, scale xd and sum xd * isum per 32, integer
// sums isum per 16), over the 32-blocks b of a group and their halves h:
//   D_bh = sum_{i in h} u_i q_i - zero * isum_h            (int32, exact)
//   K-quants: acc  += float(D_bh) * (sc_h * xd_b)           per half (or per
//                                                           block, one sc)
//             macc += mn_h * (xd_b * isum_bh)               likewise
//             y    += d * acc - dmin * macc                 per group
//   Q5_0/Q5_1 (a group is one block):
//             y    += float(D_b) * (d * xd_b) - dmin * (xd_b * isum_b)
// The packed kernel and the per-row kernel evaluate these float operations
// in the same order per token (fused multiply-adds both), and neither order
// depends on the batch, so their results are equal bit for bit and a token's
// result is the same whatever batch it shares a step with.
#ifndef BEACON_KERNELS_CPU_MATMUL_GROUP_H_
#define BEACON_KERNELS_CPU_MATMUL_GROUP_H_

#include <cstdint>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"

namespace beacon {

// Groups [g_begin, g_end) of 16 rows of a packed matrix (REQUIRES
// PackedMatrix::Supported, HasGroupFormat(w.dtype())); y has row stride
// y_stride.
void MatMulPackedGroupFormat(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin,
                             int64_t g_end, float* y, int64_t y_stride);

// Rows [row_begin, row_end) of the unpacked GGUF layout (any x86-64 with
// AVX2): Y[t][r - row_begin] with row stride y_stride. Decodes each group of
// a row once, for all the tokens.
void MatMulGroupRows(const MatrixView& w, const QuantizedRows& xq, int64_t n_tokens, int64_t row_begin, int64_t row_end,
                     float* y, int64_t y_stride);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_MATMUL_GROUP_H_
