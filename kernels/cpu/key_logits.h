// The logits of many queries against one block of cached keys: what an
// eviction's scoring spends most of its time on (kv/attention_scoring.cc;
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

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KEY_LOGITS_H_
