// The logits of many queries against one block of cached keys: what an
// eviction's scoring spends most of its time on (kv/policy/attention_scoring.cc;
// issue 34). Keys stand in a cache block as rows of `d` elements; the
// products are wanted for every query. A per-(key, query) dot product ends
// in a horizontal reduction, which at d = 128 costs about as many
// instructions as its multiplies (MatMulRowsTiled's 4x4 tiles). Here the
// block is transposed once (d x 16 floats, L1 resident) and each query's 16
// logits accumulate in one vector, a broadcast element at a time: FMAs only.
//
// Summation order: sequential over the d elements, one FMA each (so the
// results may differ from MatMulRowsTiled's lane-then-tree order in the last
// bits); the same for every query and block, so scores do not depend on the
// batch or on which thread computes them.
#ifndef BEACON_KERNELS_CPU_KEY_LOGITS_H_
#define BEACON_KERNELS_CPU_KEY_LOGITS_H_

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace beacon {

// Up to this many keys per call (a KV cache block's slots).
inline constexpr int kKeyLogitsMaxRows = 16;

// True when KeyBlockLogits runs for keys of type `t` and head size `d` in
// this build (AVX-512; f32 or bf16 keys; d a multiple of 16, at most 512).
bool KeyBlockLogitsSupported(DType t, int d);

// logits[q * ld + s] = sum_c queries[q * d + c] * key(s)[c] for s < rows,
// q < n_queries. `keys`: rows x d elements of type t, row-major.
// REQUIRES KeyBlockLogitsSupported(t, d), 1 <= rows <= kKeyLogitsMaxRows.
void KeyBlockLogits(DType t, const void* keys, int rows, int d, const float* queries, int64_t n_queries, float* logits,
                    int64_t ld);

// ---- bf16 products (AVX-512 BF16: vdpbf16ps) ----
// For a bf16 cache the keys are bf16 already; with the queries rounded to
// bf16 too, one vdpbf16ps does 32 multiply-adds where an f32 FMA does 16,
// and the products themselves are exact in f32. What changes is the
// rounding of each query element (to 8 significant bits, round to nearest
// even) and the order of the f32 sums: each lane adds its key's two
// products of a pair per instruction, pairs in order over d, with
// denormals flushed (the instruction's fixed DAZ/FTZ). Per pair the order
// is the instruction's; it is the same for every query, block and thread,
// so scores still do not depend on the batch.

// True when KeyBlockLogitsBf16 runs in this build (AVX-512 BF16; d a
// multiple of 32, at most 512).
bool KeyBlockLogitsBf16Supported(int d);

// logits[q * ld + s] = sum_c query_q[c] * key(s)[c] in f32 from bf16
// operands, for s < rows, q < n_queries; keys: rows x d bf16, row-major;
// queries: n_queries x d bf16 (Fp32ToBf16Row's rounding, dtype.h).
// REQUIRES KeyBlockLogitsBf16Supported(d), 1 <= rows <= kKeyLogitsMaxRows.
void KeyBlockLogitsBf16(const uint16_t* keys, int rows, int d, const uint16_t* queries, int64_t n_queries,
                        float* logits, int64_t ld);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KEY_LOGITS_H_
