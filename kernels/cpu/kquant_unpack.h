// The unsigned quant values `u` of one group, unpacked 32 at a time with
// AVX2 (internal to kernels/cpu).
//
// Why: machines without AVX-512 VNNI multiply K-quant and 5-bit weights on
// the per-row kernel (matmul_group_rows.cc), which decodes every group of every
// row on every call. Element by element, that decode was 78% of a Q4_K
// matrix product on an AVX2-only EPYC (`perf` of beacon-kernels-bench
// qwen15b_q4_k_ffn_up, batch 1: 0.42 GB/s, against 7.9 GB/s for the Q4_1
// kernel on the same machine), and the 1.5B model decoded 0.8 tokens a
// second there. The bytes of each layout are already grouped 32 elements to
// a run (ggml arranges them for its own SIMD code), so a run is one load,
// one shift and one mask per bit field.
#ifndef BEACON_KERNELS_CPU_KQUANT_UNPACK_H_
#define BEACON_KERNELS_CPU_KQUANT_UNPACK_H_

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace beacon {

// Writes u[0 .. group) of group `g` of a row of type `t`, equal to what the
// scalar decode writes (tests/kernels/cpu/kquant_blocks_test.cc checks every
// type on random bytes). Returns false, writing nothing, where this build has
// no AVX2 or `t` has no group format; the caller then decodes element by
// element.
bool UnpackGroupU(DType t, const void* row, int64_t g, uint8_t* u);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KQUANT_UNPACK_H_
