// Stand-in for cuda_bf16.h: the bfloat16 storage types and the conversions
// the kernels use, bit-exact with the CUDA headers (round to nearest even; a
// NaN becomes the canonical quiet NaN 0x7fff). No bf16 arithmetic operators:
// the kernels convert to float first, and an operator added here would let
// code compile that the real headers reject in host code.
#pragma once

#include <bit>
#include <cstdint>

#include "cuda_runtime.h"

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct alignas(2) __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
  operator __nv_bfloat16_raw() const { return {__x}; }
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return __nv_bfloat16_raw{bits}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline float __bfloat162float(__nv_bfloat16 b) { return std::bit_cast<float>(static_cast<uint32_t>(b.__x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(0x7fff);
  return __ushort_as_bfloat16(static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return {__bfloat162float(v.x), __bfloat162float(v.y)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
