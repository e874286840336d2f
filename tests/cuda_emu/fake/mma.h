// Stand-in for mma.h: the warp matrix API (nvcuda::wmma) for bf16 inputs and
// fp32 accumulators, the subset the kernels use.
//
// CUDA leaves the mapping of a fragment's elements to lanes unspecified, so
// code may only treat x[] uniformly (fill, scale every element). Here lane l
// holds logical elements e * 32 + l of the fragment's matrix in row-major
// order (num_elements = rows * cols / 32, as on the hardware for these
// shapes): code that assumes some other mapping reads wrong values.
//
// Checks (EMU ERROR, exit status 3): load/store pointers must be 256-bit
// aligned and ldm a multiple of 16 bytes' elements (CUDA's requirements);
// pointer and ldm must be the same in every lane; every lane must take part
// (loads, stores and mma_sync are warp collectives here, as on the device).
// Numerics: products and sums in fp32, k in order (the hardware's order and
// intermediate rounding differ; its products of bf16 are exact, as here).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
template <class Use, int m, int n, int k>
struct Shape;
template <int m, int n, int k>
struct Shape<matrix_a, m, n, k> {
  static constexpr int rows = m, cols = k;
};
template <int m, int n, int k>
struct Shape<matrix_b, m, n, k> {
  static constexpr int rows = k, cols = n;
};
template <int m, int n, int k>
struct Shape<accumulator, m, n, k> {
  static constexpr int rows = m, cols = n;
};

inline float ToFloat(float v) { return v; }
inline float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
T FromFloat(float v);
template <>
inline float FromFloat<float>(float v) {
  return v;
}
template <>
inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// A warp collective: every lane must pass the same pointer and ldm, the
// pointer 32-byte aligned and ldm a multiple of 16 bytes of T.
template <class T>
void CheckAccess(const T* ptr, unsigned ldm, const char* what) {
  struct Access {
    uint64_t ptr, ldm;
  } mine{reinterpret_cast<uintptr_t>(ptr), ldm}, all[32];
  emu::WarpShare(&mine, sizeof(mine), all);
  for (const Access& a : all) {
    if (a.ptr != mine.ptr || a.ldm != mine.ldm) {
      emu::KernelError((std::string(what) + ": pointer or ldm differs across the warp").c_str());
      break;
    }
  }
  if (mine.ptr % 32 != 0) emu::KernelError((std::string(what) + ": pointer not 256-bit aligned").c_str());
  if (ldm % (16 / sizeof(T)) != 0) emu::KernelError((std::string(what) + ": ldm not a multiple of 16 bytes").c_str());
}
}  // namespace detail

template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment {
 public:
  static constexpr int rows = detail::Shape<Use, m, n, k>::rows;
  static constexpr int cols = detail::Shape<Use, m, n, k>::cols;
  static constexpr int num_elements = rows * cols / 32;
  static_assert(rows * cols % 32 == 0, "fragment shape");
  T x[num_elements];

  // Row and column of element e of the running lane.
  static int Row(int e) { return (e * 32 + static_cast<int>(emu::thread_idx.x % 32)) / cols; }
  static int Col(int e) { return (e * 32 + static_cast<int>(emu::thread_idx.x % 32)) % cols; }
};

template <class Use, int m, int n, int k, class T, class Layout>
void fill_fragment(fragment<Use, m, n, k, T, Layout>& f, const T& v) {
  for (T& e : f.x) e = v;
}

// matrix_a / matrix_b: the layout is the fragment's.
template <class Use, int m, int n, int k, class T, class Layout>
void load_matrix_sync(fragment<Use, m, n, k, T, Layout>& f, const T* ptr, unsigned ldm) {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>, "matrix_a/b load");
  using F = fragment<Use, m, n, k, T, Layout>;
  detail::CheckAccess(ptr, ldm, "wmma::load_matrix_sync");
  for (int e = 0; e < F::num_elements; ++e) {
    const int r = F::Row(e), c = F::Col(e);
    f.x[e] = std::is_same_v<Layout, row_major> ? ptr[r * ldm + c] : ptr[c * ldm + r];
  }
}

// accumulator: the layout is the call's.
template <int m, int n, int k, class T>
void load_matrix_sync(fragment<accumulator, m, n, k, T>& f, const T* ptr, unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, m, n, k, T>;
  detail::CheckAccess(ptr, ldm, "wmma::load_matrix_sync");
  for (int e = 0; e < F::num_elements; ++e) {
    const int r = F::Row(e), c = F::Col(e);
    f.x[e] = layout == mem_row_major ? ptr[r * ldm + c] : ptr[c * ldm + r];
  }
}

template <int m, int n, int k, class T>
void store_matrix_sync(T* ptr, const fragment<accumulator, m, n, k, T>& f, unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, m, n, k, T>;
  detail::CheckAccess(static_cast<const T*>(ptr), ldm, "wmma::store_matrix_sync");
  for (int e = 0; e < F::num_elements; ++e) {
    const int r = F::Row(e), c = F::Col(e);
    (layout == mem_row_major ? ptr[r * ldm + c] : ptr[c * ldm + r]) = f.x[e];
  }
}

// d = a * b + c (d may be c). Each lane gathers the whole of a, b and c from
// the warp and computes its own elements of d.
template <int m, int n, int k, class Tab, class La, class Lb, class Tc>
void mma_sync(fragment<accumulator, m, n, k, Tc>& d, const fragment<matrix_a, m, n, k, Tab, La>& a,
              const fragment<matrix_b, m, n, k, Tab, Lb>& b, const fragment<accumulator, m, n, k, Tc>& c,
              bool satf = false) {
  using A = fragment<matrix_a, m, n, k, Tab, La>;
  using B = fragment<matrix_b, m, n, k, Tab, Lb>;
  using D = fragment<accumulator, m, n, k, Tc>;
  Tab all_a[32 * A::num_elements], all_b[32 * B::num_elements];
  Tc all_c[32 * D::num_elements];
  emu::WarpShare(a.x, sizeof(a.x), all_a);
  emu::WarpShare(b.x, sizeof(b.x), all_b);
  emu::WarpShare(c.x, sizeof(c.x), all_c);
  // Logical element i of a fragment sits in lane i % 32, element i / 32.
  auto at = [](const auto* all, int per_lane, int i) { return detail::ToFloat(all[(i % 32) * per_lane + i / 32]); };
  for (int e = 0; e < D::num_elements; ++e) {
    const int r = D::Row(e), col = D::Col(e);
    float acc = at(all_c, D::num_elements, r * n + col);
    for (int kk = 0; kk < k; ++kk) {
      acc = fmaf(at(all_a, A::num_elements, r * k + kk), at(all_b, B::num_elements, kk * n + col), acc);
    }
    d.x[e] = detail::FromFloat<Tc>(acc);
  }
  (void)satf;
}

}  // namespace nvcuda::wmma
