// Block layouts of llama.cpp's K-quants and of the legacy 5-bit types, and
// the one integer form every kernel of ours reads them through.
//
// K-quants store super-blocks of 256 elements (QK_K) with sub-block scales
// (little endian, as in GGUF; the element orders below are those of ggml's
// dequantize_row_*; tests/reference checks them against the `gguf` package):
//   Q2_K (84 B):  u8 scales[16]; u8 qs[64]; fp16 d; fp16 dmin
//     16 sub-blocks of 16: x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4),
//     q (2 bits) of element 128h + 32j + i is (qs[32h + i] >> 2j) & 3.
//   Q3_K (110 B): u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d
//     16 sub-blocks of 16: x = d * (sc6[s] - 32) * q, q = low2 - (hbit ? 0 : 4),
//     low2 as Q2_K's q, hbit of element 32j + i is bit j of hmask[i]; sc6 packs
//     4 low bits (scales[0..7], low nibble first) and 2 high bits (scales[8..11]).
//   Q4_K (144 B): fp16 d; fp16 dmin; u8 scales[12]; u8 qs[128]
//     8 sub-blocks of 32: x = d * sc[s] * q - dmin * m[s], 6-bit sc and m
//     packed in scales[12]; q (4 bits) of sub-block 2c + k, element i is
//     nibble k of qs[32c + i].
//   Q5_K (176 B): fp16 d; fp16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
//     as Q4_K with a fifth bit: bit s of qh[i] for element i of sub-block s.
//   Q6_K (210 B): u8 ql[128]; u8 qh[64]; s8 scales[16]; fp16 d
//     16 sub-blocks of 16: x = d * scales[s] * (q - 32), q = low4 | high2 << 4,
//     low4 of element 128h + 64k + i is nibble k of ql[64h + i], high2 of
//     element 128h + 32j + i is (qh[32h + i] >> 2j) & 3.
//
// The integer form (QuantGroup). Every supported quantised type except Q8_0,
// Q4_0 and Q4_1 (which keep their own kernels) is, per group of G elements
// (256 for K-quants, 32 for Q5_0/Q5_1):
//   x[i] = d * sc[i / 16] * (u[i] - zero) - dmin * mn[i / 16]
// with u[i] an unsigned integer of `bits` bits, sc and mn small integers
// (int8) and d, dmin floats (fp16 values widened). Q5_0 has sc = 1 and
// zero = 16; Q5_1 sc = 1, mn = 1, dmin = -m. The integer kernels multiply u
// with int8 activations and apply sc, zero and mn in integer arithmetic, so
// only d and dmin (and the activation scale) enter as floats.
#ifndef BEACON_KERNELS_CPU_KQUANT_BLOCKS_H_
#define BEACON_KERNELS_CPU_KQUANT_BLOCKS_H_

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace beacon {

inline constexpr int kQK = 256;  // elements of a K-quant super-block

struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// How a type maps onto the integer form: a compile-time description the
// packers and kernels are specialised on.
struct QuantGroupFormat {
  int group = 0;        // elements per group (one fp16 d, dmin): 256 or 32
  int bits = 0;         // bits of u: 2..6
  int zero = 0;         // subtracted from u
  bool scales = false;  // sc per 16 elements is stored (else sc = 1)
  bool sc16 = false;    // sc differs between the halves of a 32-block
  int mins = 0;         // 0: no min; 1: mn per 16 stored; 2: mn = 1 (Q5_1)
  bool mn16 = false;    // mn differs between the halves of a 32-block
};

// The format of `t`; group == 0 for types without one (F32/F16/BF16, Q8_0,
// Q4_0, Q4_1).
constexpr QuantGroupFormat GroupFormatOf(DType t) {
  switch (t) {
    case DType::kQ2_K: return {256, 2, 0, true, true, 1, true};
    case DType::kQ3_K: return {256, 3, 4, true, true, 0, false};
    case DType::kQ4_K: return {256, 4, 0, true, false, 1, false};
    case DType::kQ5_K: return {256, 5, 0, true, false, 1, false};
    case DType::kQ6_K: return {256, 6, 32, true, true, 0, false};
    case DType::kQ5_0: return {32, 5, 16, false, false, 0, false};
    case DType::kQ5_1: return {32, 5, 0, false, false, 2, false};
    default: return {};
  }
}
constexpr bool HasGroupFormat(DType t) { return IsKQuant(t) || t == DType::kQ5_0 || t == DType::kQ5_1; }

// One group decoded into the integer form.
struct QuantGroup {
  uint8_t u[kQK];
  int8_t sc[kQK / 16];
  int8_t mn[kQK / 16];
  float d;
  float dmin;
};

// Decodes group `g` of a row of type `t` (REQUIRES HasGroupFormat(t)): the
// first GroupFormatOf(t).group entries of u and group / 16 of sc and mn are
// written (sc = 1, mn = 0 where the type has none).
void DecodeGroup(DType t, const void* row, int64_t g, QuantGroup* out);

// DecodeGroup element by element, as builds without AVX2 run it: the
// reference its unpacking (kquant_unpack.h) is tested against.
void DecodeGroupElementwise(DType t, const void* row, int64_t g, QuantGroup* out);

// The inverse of DecodeGroup: writes group `g` of a row of type `t` from its
// integer form. REQUIRES every field in its type's range (u < 2^bits; sc and
// mn as the layout stores them; d, dmin fp16 values) and the group's bytes
// zeroed beforehand. Used by QuantizeRow (dummy models, tests).
void EncodeGroup(DType t, const QuantGroup& q, void* row, int64_t g);

// Float -> type t for QuantizeRow (quantize_group.cc): a min/max scheme;
// every element reads back within one level step of its input (plus one
// dmin for the types with a min). REQUIRES HasGroupFormat(t), n a multiple
// of the group.
void QuantizeGroupRow(DType t, const float* src, void* dst, int64_t n);

// Scalar dequantisation of n elements (REQUIRES HasGroupFormat(t), n a
// multiple of the group): the same float operations in the same order as
// the `gguf` package's dequantize, so the results are equal bit for bit.
void DequantizeGroupRow(DType t, const void* src, float* dst, int64_t n);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KQUANT_BLOCKS_H_
