// Float -> storage-type conversion of one row: the inverse of DequantizeRow.
//
// Used to build quantised weights where no quantised file exists (seeded dummy
// models for benchmarks, kernel tests). The block layouts are those of
// dtype.h, so DequantizeRow and every matmul kernel read the output unchanged.
//
// Schemes (per block of 32; d, m are stored as fp16 and the rounded values
// are the ones used to pick q, so the bound below holds after storage):
//   Q8_0: d = max|x| / 127,           q = round(x / d)            in [-127, 127]
//   Q4_0: d = max|x| / 7,             q = round(x / d) + 8        in [1, 15]
//         (symmetric, so the bound holds at both ends; ggml's own quantiser
//          uses d = -max_signed / 8, which is one level finer but can miss
//          the opposite extreme by a whole step)
//   Q4_1: m = min(x) rounded *down* to fp16, d = (max(x) - m) / 15,
//         q = round((x - m) / d)                                   in [0, 15]
//   Q5_0, Q5_1 and the K-quants: kquant_blocks.h's QuantizeGroupRow (a
//         min/max scheme per sub-block; within one level step).
// Guarantee (Q8_0, Q4_0, Q4_1): |DequantizeRow(QuantizeRow(x))[i] - x[i]| <= d/2 (+ float
// rounding) for each element, with d that element's stored block scale, for
// finite inputs whose block scale is representable in fp16 (|x| < ~8e6 for
// Q8_0). A block of zeros stores d = 0 and reads back as exact zeros.
#ifndef BEACON_KERNELS_CPU_QUANTIZE_H_
#define BEACON_KERNELS_CPU_QUANTIZE_H_

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace beacon {

// Writes `n` elements of `src` as one row of type `t` to `dst`
// (DTypeRowBytes(t, n) bytes). F32/F16/BF16 are plain conversions (round to
// nearest even). REQUIRES: n % DTypeBlockElems(t) == 0.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_QUANTIZE_H_
