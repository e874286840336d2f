// Element types of weight tensors, as the CPU kernels understand them.
//
// The numeric values equal ggml's type ids so that a GGUF tensor's type field
// maps directly. Quantised types are stored in blocks along a row (the
// contiguous dimension): 32 elements for the legacy types, super-blocks of
// 256 for the K-quants (kquant_blocks.h); a row's length must be a multiple
// of the block size.
//
// Block layouts (little endian, as in GGUF):
//   Q8_0: fp16 d;            int8 q[32]           x = d * q
//   Q4_0: fp16 d;            uint8 qs[16]         x = d * (nibble - 8)
//   Q4_1: fp16 d; fp16 m;    uint8 qs[16]         x = d * nibble + m
//   Q5_0: fp16 d; u32 qh;    uint8 qs[16]         x = d * (q5 - 16)
//   Q5_1: fp16 d; fp16 m; u32 qh; uint8 qs[16]    x = d * q5 + m
// where element j < 16 is the low nibble of qs[j] and element j + 16 the high,
// and Q5's fifth bit of element j is bit j of qh. The K-quants (Q2_K..Q6_K)
// are described in kquant_blocks.h.
#ifndef BEACON_KERNELS_CPU_DTYPE_H_
#define BEACON_KERNELS_CPU_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace beacon {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

inline constexpr int kQuantBlock = 32;

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bytes, not a uint32: the block is 22 bytes, unaligned
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);

// True for the types above; false for any other ggml id.
bool IsSupportedDType(uint32_t ggml_type);
// The block-quantised types (integer dot products, packing, Q8 activations).
constexpr bool IsQuantized(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: return false;
    default: return true;
  }
}
// The K-quants: super-blocks of 256 elements with sub-block scales.
constexpr bool IsKQuant(DType t) {
  return t == DType::kQ2_K || t == DType::kQ3_K || t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K;
}
std::string_view DTypeName(DType t);
// Elements per block (1 for float types, 32 for the legacy quantised types,
// 256 for the K-quants) and bytes per block.
int DTypeBlockElems(DType t);
size_t DTypeBlockBytes(DType t);
// Bytes of a row of `n` elements; REQUIRES n % DTypeBlockElems(t) == 0.
size_t DTypeRowBytes(DType t, int64_t n);

// IEEE half and bfloat16 conversions (round to nearest even on the way down).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);
inline float Bf16ToFp32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t Fp32ToBf16(float f);
// Fp32ToBf16 over n elements (the KV cache's write path).
void Fp32ToBf16Row(const float* src, int64_t n, uint16_t* dst);

// Dequantises `n` elements of one row stored as `t` at `src` into `dst`.
// Scalar reference code: the fast paths live in matmul.cc and are tested
// against this.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_DTYPE_H_
