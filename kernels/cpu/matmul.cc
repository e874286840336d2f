#include "kernels/cpu/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/matmul_group.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/matmul_tiled.h"
#include "kernels/cpu/simd.h"

namespace beacon {
namespace {

// Tokens processed together against one decoded weight block.
constexpr int kTokenTile = 4;

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Sum over 4-byte groups of u8 * s8 products, accumulated into int32 lanes.
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  const __m256i p16 = _mm256_maddubs_epi16(u, s);  // |nibble * q| <= 15*127*2: no saturation
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

// Unpacks 16 bytes of nibbles into 32 unsigned bytes: element j < 16 is the
// low nibble of byte j, element j + 16 its high nibble (the GGUF order).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
  return _mm256_set_m128i(hi, lo);
}

// One weight block decoded for the integer kernel: unsigned bytes `u` (for
// Q8_0 the absolute values; `sign_src` keeps the signs), scale `d` and the
// coefficient `c` of the per-block activation sum (Q4_1: min; Q4_0: -8 d).
struct DecodedBlock {
  __m256i u;
  __m256i sign_src;
  float d;
  float c;
};

template <DType T>
inline DecodedBlock DecodeBlock(const uint8_t* row, int64_t b) {
  DecodedBlock out;
  if constexpr (T == DType::kQ4_1) {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
    out.u = UnpackNibbles(blk->qs);
    out.d = HalfToFloat(blk->d);
    out.c = HalfToFloat(blk->m);
  } else if constexpr (T == DType::kQ4_0) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    out.u = UnpackNibbles(blk->qs);
    out.d = HalfToFloat(blk->d);
    out.c = -8.0f * out.d;
  } else {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    out.u = _mm256_sign_epi8(q, q);  // |q|, with -128 -> 128 as unsigned
    out.sign_src = q;
    out.d = HalfToFloat(blk->d);
    out.c = 0.0f;
  }
  return out;
}

// Dot products of one quantised weight row with NT activation rows.
template <DType T, int NT>
inline void QuantRowDot(const uint8_t* row, int64_t n_blocks, const QuantizedRows& xq, int64_t t0, float* out) {
  __m256 acc[NT];
  float offset[NT];
  const int8_t* xqs[NT];
  const float* xd[NT];
  const float* xs[NT];
  for (int i = 0; i < NT; ++i) {
    acc[i] = _mm256_setzero_ps();
    offset[i] = 0.0f;
    xqs[i] = xq.q.data() + (t0 + i) * xq.cols;
    xd[i] = xq.d.data() + (t0 + i) * n_blocks;
    xs[i] = xq.sum.data() + (t0 + i) * n_blocks;
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const DecodedBlock w = DecodeBlock<T>(row, b);
    for (int i = 0; i < NT; ++i) {
      __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xqs[i] + b * 32));
      if constexpr (T == DType::kQ8_0) s = _mm256_sign_epi8(s, w.sign_src);
      const __m256i dot = DotU8S8(_mm256_setzero_si256(), w.u, s);
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(w.d * xd[i][b]), acc[i]);
      if constexpr (T != DType::kQ8_0) offset[i] += w.c * xs[i][b];
    }
  }
  for (int i = 0; i < NT; ++i) out[i] = HorizontalSum(acc[i]) + offset[i];
}

// Loads 8 weights of a float-typed row as f32.
template <DType T>
inline __m256 LoadFloat8(const uint8_t* row, int64_t c) {
  if constexpr (T == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (T == DType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <DType T>
inline float ScalarWeight(const uint8_t* row, int64_t c) {
  float v;
  DequantizeRow(T, row + c * DTypeBlockBytes(T), &v, 1);
  return v;
}

template <DType T, int NT>
inline void FloatRowDot(const uint8_t* row, int64_t cols, const float* x, int64_t t0, float* out) {
  __m256 acc[NT];
  for (int i = 0; i < NT; ++i) acc[i] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m256 w = LoadFloat8<T>(row, c);
    for (int i = 0; i < NT; ++i) {
      acc[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (t0 + i) * cols + c), acc[i]);
    }
  }
  for (int i = 0; i < NT; ++i) {
    float s = HorizontalSum(acc[i]);
    for (int64_t k = c; k < cols; ++k) s += ScalarWeight<T>(row, k) * x[(t0 + i) * cols + k];
    out[i] = s;
  }
}

template <DType T>
void RowsKernel(const MatrixView& w, const float* x, const QuantizedRows* xq, int64_t n_tokens, int64_t row_begin,
                int64_t row_end, float* y, int64_t y_stride) {
  constexpr bool kQuant = IsQuantized(T);
  const size_t row_bytes = DTypeRowBytes(T, w.cols);
  const int64_t n_blocks = w.cols / kQuantBlock;
  float out[kTokenTile];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + row_bytes * r;
    int64_t t = 0;
    auto emit = [&](int nt) {
      for (int i = 0; i < nt; ++i) y[(t + i) * y_stride + (r - row_begin)] = out[i];
    };
    for (; t + kTokenTile <= n_tokens; t += kTokenTile) {
      if constexpr (kQuant)
        QuantRowDot<T, kTokenTile>(row, n_blocks, *xq, t, out);
      else
        FloatRowDot<T, kTokenTile>(row, w.cols, x, t, out);
      emit(kTokenTile);
    }
    for (; t < n_tokens; ++t) {
      if constexpr (kQuant)
        QuantRowDot<T, 1>(row, n_blocks, *xq, t, out);
      else
        FloatRowDot<T, 1>(row, w.cols, x, t, out);
      emit(1);
    }
  }
}

// Groups (16 rows each) per chunk a thread claims: about kChunkBytes of
// weights per token of the batch, so that one thread streams a long run of
// contiguous bytes (fewer restarts of the prefetchers, fewer claims), but
// never fewer than 4 chunks per thread, so that the threads still balance
// on a small matrix or a shared machine. On the 1.5B model's 191 MB output
// matrix at batch 1, 1 MiB chunks read 24.8-25.6 GB/s where chunks of 8
// groups (160 KiB) read 22.5-23.1, and the whole model's batch-1 step went
// from 49.8 to 44.5 ms (issue 34; 256 and 512 KiB were in between).
int64_t PackedGrain(const PackedMatrix& w, int64_t n_tokens, int n_threads) {
  constexpr size_t kChunkBytes = size_t{1} << 20;
  const int64_t by_bytes = static_cast<int64_t>(kChunkBytes / std::max<size_t>(1, w.group_bytes())) / n_tokens;
  const int64_t cap = w.n_groups() / (4 * std::max(1, n_threads));
  return std::max<int64_t>(1, std::min(by_bytes, cap));
}

void ParallelOrInline(ThreadPool* pool, int64_t n, int64_t grain,
                      const std::function<void(int64_t, int64_t, int)>& fn) {
  if (pool == nullptr) {
    fn(0, n, 0);
  } else {
    pool->ParallelFor(n, grain, fn);
  }
}

}  // namespace

void QuantizeRowsQ8(const float* x, int64_t n_rows, int64_t cols, QuantizedRows* out) {
  const int64_t nb = cols / kQuantBlock;
  out->n_rows = n_rows;
  out->cols = cols;
  out->q.resize(n_rows * cols);
  out->d.resize(n_rows * nb);
  out->sum.resize(n_rows * nb);
  out->isum16.resize(n_rows * nb * 2);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n_rows * nb; ++i) {
    const float* src = x + i * kQuantBlock;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(src + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_abs = _mm_cvtss_f32(m);
    const float d = max_abs / 127.0f;
    const __m256 inv = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i q32[4];
    for (int k = 0; k < 4; ++k) {
      q32[k] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // Pack 32 int32 -> 32 int8 keeping element order (packs interleave lanes).
    __m256i p01 = _mm256_packs_epi32(q32[0], q32[1]);
    __m256i p23 = _mm256_packs_epi32(q32[2], q32[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q.data() + i * kQuantBlock), p);
    // q32[0..1] hold elements 0-15, q32[2..3] elements 16-31.
    auto hsum = [](__m256i v) {
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      s4 = _mm_hadd_epi32(s4, s4);
      s4 = _mm_hadd_epi32(s4, s4);
      return _mm_cvtsi128_si32(s4);
    };
    const int32_t lo = hsum(_mm256_add_epi32(q32[0], q32[1]));
    const int32_t hi = hsum(_mm256_add_epi32(q32[2], q32[3]));
    out->d[i] = d;
    out->sum[i] = d * static_cast<float>(lo + hi);
    out->isum16[2 * i] = lo;
    out->isum16[2 * i + 1] = hi;
  }
}

void MatMulRows(const MatrixView& w, const float* x, const QuantizedRows* xq, int64_t n_tokens, int64_t row_begin,
                int64_t row_end, float* y, int64_t y_stride) {
  switch (w.dtype) {
    case DType::kQ4_1: return RowsKernel<DType::kQ4_1>(w, x, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ4_0: return RowsKernel<DType::kQ4_0>(w, x, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ8_0: return RowsKernel<DType::kQ8_0>(w, x, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kF32: return RowsKernel<DType::kF32>(w, x, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kF16: return RowsKernel<DType::kF16>(w, x, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kBF16: return RowsKernel<DType::kBF16>(w, x, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return MatMulGroupRows(w, *xq, n_tokens, row_begin, row_end, y, y_stride);
  }
}

bool MatMulIsTiled(DType w, int64_t n_tokens) { return !IsQuantized(w) && n_tokens >= kTiledMinTokens; }

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool, QuantizedRows* scratch) {
  if (n_tokens <= 0 || w.rows <= 0) return;
  const QuantizedRows* xq = nullptr;
  if (IsQuantized(w.dtype)) {
    QuantizeRowsQ8(x, n_tokens, w.cols, scratch);
    xq = scratch;
  }
  if (w.packed != nullptr) {
    const int64_t grain = PackedGrain(*w.packed, n_tokens, pool == nullptr ? 1 : pool->n_threads());
    const bool grouped = HasGroupFormat(w.dtype);
    ParallelOrInline(pool, w.packed->n_groups(), grain, [&](int64_t begin, int64_t end, int) {
      if (grouped) {
        MatMulPackedGroupFormat(*w.packed, *xq, n_tokens, begin, end, y, w.rows);
      } else {
        MatMulPackedGroups(*w.packed, *xq, n_tokens, begin, end, y, w.rows);
      }
    });
    return;
  }
  const bool tiled = MatMulIsTiled(w.dtype, n_tokens);
  // Row chunks small enough to balance two threads, large enough that the
  // per-chunk overhead is negligible; wider batches need fewer rows per chunk.
  const int64_t grain = tiled ? 4 * kTiledRowTile : std::max<int64_t>(8, 256 / std::max<int64_t>(1, n_tokens));
  ParallelOrInline(pool, w.rows, grain, [&](int64_t begin, int64_t end, int) {
    if (tiled) {
      MatMulRowsTiled(w, x, n_tokens, begin, end, y + begin, w.rows);
    } else {
      MatMulRows(w, x, xq, n_tokens, begin, end, y + begin, w.rows);
    }
  });
}

}  // namespace beacon
