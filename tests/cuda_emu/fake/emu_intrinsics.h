// Device math and bit intrinsics on the host, and CUDA's global min/max
// overloads. Included by cuda_runtime.h.
//
// Contract: integer and bit intrinsics are exact. Floating-point intrinsics
// with an explicit rounding mode (_rn, _rz) are single IEEE operations that
// are never fused with their neighbours, as nvcc guarantees for them; plain
// expressions may be contracted to FMA by the host compiler much as nvcc
// contracts them by default. Fast-math intrinsics (__expf, ...) use the
// accurate libm functions, and libm differs from CUDA's math library in the
// last ulps: the emulator does not reproduce device numerics bit for bit.
#pragma once

#include <math.h>

#include <bit>
#include <cmath>
#include <cstdint>

namespace emu {
// Forces `v` into a register as computed, so the host compiler cannot fuse
// the operation that produced it with the one that consumes it (FMA).
template <class T>
inline T Materialize(T v) {
  asm("" : "+x"(v));
  return v;
}
}  // namespace emu

// ---- integer and bit -------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}

// ---- reinterpretation and conversion ----------------------------------------------
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline long long __double_as_longlong(double d) { return std::bit_cast<long long>(d); }
inline double __longlong_as_double(long long v) { return std::bit_cast<double>(v); }
// _rz: truncation, which is what a C++ float->integer conversion does.
inline int __float2int_rz(float f) { return static_cast<int>(f); }
inline unsigned __float2uint_rz(float f) { return static_cast<unsigned>(f); }
inline long long __float2ll_rz(float f) { return static_cast<long long>(f); }
inline unsigned long long __float2ull_rz(float f) { return static_cast<unsigned long long>(f); }
inline int __float2int_rn(float f) { return static_cast<int>(std::nearbyint(f)); }  // default mode: to nearest even
inline int __float2int_rd(float f) { return static_cast<int>(std::floor(f)); }
inline int __float2int_ru(float f) { return static_cast<int>(std::ceil(f)); }

// ---- single precision ----------------------------------------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __fadd_rn(float a, float b) { return emu::Materialize(emu::Materialize(a) + emu::Materialize(b)); }
inline float __fsub_rn(float a, float b) { return emu::Materialize(emu::Materialize(a) - emu::Materialize(b)); }
inline float __fmul_rn(float a, float b) { return emu::Materialize(emu::Materialize(a) * emu::Materialize(b)); }
inline float __fdiv_rn(float a, float b) { return emu::Materialize(a / b); }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __frcp_rn(float a) { return emu::Materialize(1.0f / a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

// ---- double precision ------------------------------------------------------------------
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline double __dadd_rn(double a, double b) { return emu::Materialize(emu::Materialize(a) + emu::Materialize(b)); }
inline double __dsub_rn(double a, double b) { return emu::Materialize(emu::Materialize(a) - emu::Materialize(b)); }
inline double __dmul_rn(double a, double b) { return emu::Materialize(emu::Materialize(a) * emu::Materialize(b)); }
inline double __ddiv_rn(double a, double b) { return emu::Materialize(a / b); }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline double __drcp_rn(double a) { return emu::Materialize(1.0 / a); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }

using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;

// ---- CUDA's global min/max overloads (integers mixed as CUDA promotes them) ---------
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned min(int a, unsigned b) { return min(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, static_cast<unsigned>(b)); }
inline long min(long a, long b) { return a < b ? a : b; }
inline long min(int a, long b) { return min(static_cast<long>(a), b); }
inline long min(long a, int b) { return min(a, static_cast<long>(b)); }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned max(int a, unsigned b) { return max(static_cast<unsigned>(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, static_cast<unsigned>(b)); }
inline long max(long a, long b) { return a > b ? a : b; }
inline long max(int a, long b) { return max(static_cast<long>(a), b); }
inline long max(long a, int b) { return max(a, static_cast<long>(b)); }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
