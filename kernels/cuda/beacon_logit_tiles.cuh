// The logit tile of BeaconKV's scoring kernels (beacon_logits.cu): the
// products q . k of kTileQueries scoring queries with kChunkSlots cached keys,
// on CUDA cores (SimtTile) or on tensor cores (MmaTile<kD>).
//
// A tile's contract, which both kernels of beacon_logits.cu drive:
//   kKeyChunks                        chunks its key buffer holds at once
//   StageQueries(qh, nq, q0, d, ts)   queries q0 .. q0 + 31 of a head
//   StageKeys(rows, c, d, ts)         the keys of the chunk in `rows` into
//                                     key buffer c (< kKeyChunks)
//   Logits(qh, nq, q0, d, rows, c, ts, acc)
//       acc[r] = q[q0 + warp * 8 + r] . key[lane] over head_dim, the keys
//       of `rows`, staged in buffer c (rows past nq and slots past n_slots
//       see zeros)
// Every thread of the block calls each of them (they synchronise), and a
// tile may stage either input at the call that names it or inside Logits:
// the kernels call StageQueries whenever the query tile changes and
// StageKeys whenever a buffer's chunk does, so each implementation stages no
// more often than its own layout needs.
#ifndef BEACON_KERNELS_CUDA_BEACON_LOGIT_TILES_CUH_
#define BEACON_KERNELS_CUDA_BEACON_LOGIT_TILES_CUH_

#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>

#include "kernels/cuda/beacon_logits.h"

namespace beacon::beacon_logits {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kQueriesPerThread = 8;
constexpr int kTileQueries = kWarps * kQueriesPerThread;

// The chunk's key rows and positions, set by SetKeyRows.
struct KeyRows {
  const __nv_bfloat16* row[kChunkSlots];  // nullptr past n_slots
  int32_t pos[kChunkSlots];               // kv.pos of the chunk's slots (INT32_MAX past n_slots)
};

// Caller synchronises before the tile reads `rows`.
__device__ inline void SetKeyRows(const Args& a, int layer, int kv_head, int32_t s0, KeyRows& rows) {
  if (threadIdx.x < kChunkSlots) {
    const int32_t s = s0 + static_cast<int32_t>(threadIdx.x);
    const PagedKvLayout& l = a.kv.layout;
    const bool in = s < a.n_slots;
    rows.row[threadIdx.x] =
        in ? a.kv.k + l.KvIndex(layer, a.block_table[s / l.block_size], kv_head, s % l.block_size) : nullptr;
    rows.pos[threadIdx.x] =
        in ? a.kv.pos[l.PosIndex(layer, a.block_table[s / l.block_size], kv_head, s % l.block_size)] : INT32_MAX;
  }
}

// CUDA cores, fp32 FMAs in ascending dimension order with the keys widened
// from bf16: warp w holds queries w * 8 .. w * 8 + 7 of the tile in
// registers, and keys and queries go through shared memory together in
// chunks of kDimChunk dimensions (any even head_dim). Per 4 dimensions a
// thread does one float4 key load (row pitch kDimChunk + 4 floats: the 8
// lanes of a quarter-warp hit distinct banks), eight broadcast float4 query
// loads and 32 FMAs. Both inputs are staged inside Logits.
struct SimtTile {
  static constexpr int kDimChunk = 64;
  static constexpr int kKeyPitch = kDimChunk + 4;
  struct Smem {
    __align__(16) float keys[kChunkSlots * kKeyPitch];
    __align__(16) float queries[kTileQueries * kDimChunk];
  };

  static constexpr int kKeyChunks = 1;  // Logits restages from `rows` every time

  __device__ static void StageQueries(const float*, int, int, int, Smem&) {}
  __device__ static void StageKeys(const KeyRows&, int, int, Smem&) {}

  __device__ static void Logits(const float* qh, int nq, int q0, int d, const KeyRows& rows, int, Smem& sm,
                                float (&acc)[kQueriesPerThread]) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    constexpr int kPairs = kDimChunk / 2;
#pragma unroll
    for (int r = 0; r < kQueriesPerThread; ++r) acc[r] = 0.0f;
    const bool warp_busy = q0 + warp * kQueriesPerThread < nq;
    for (int c0 = 0; c0 < d; c0 += kDimChunk) {
      const int width = d - c0 < kDimChunk ? d - c0 : kDimChunk;  // even
      for (int idx = tid; idx < kChunkSlots * kPairs; idx += kThreads) {
        const int s = idx / kPairs, c = 2 * (idx - s * kPairs);
        float2 v = make_float2(0.0f, 0.0f);
        const __nv_bfloat16* row = rows.row[s];
        if (row != nullptr && c < width) v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(row + c0 + c));
        sm.keys[s * kKeyPitch + c] = v.x;
        sm.keys[s * kKeyPitch + c + 1] = v.y;
      }
      for (int idx = tid; idx < kTileQueries * kPairs; idx += kThreads) {
        const int j = idx / kPairs, c = 2 * (idx - j * kPairs);
        const int q = q0 + j;
        float2 v = make_float2(0.0f, 0.0f);
        if (q < nq && c < width) v = *reinterpret_cast<const float2*>(qh + static_cast<size_t>(q) * d + c0 + c);
        sm.queries[j * kDimChunk + c] = v.x;
        sm.queries[j * kDimChunk + c + 1] = v.y;
      }
      __syncthreads();
      if (warp_busy) {
        const int width4 = (width + 3) & ~3;  // the padding holds zeros
        const float* krow = sm.keys + lane * kKeyPitch;
        const float* qrows = sm.queries + warp * kQueriesPerThread * kDimChunk;
        for (int c = 0; c < width4; c += 4) {
          const float4 k = *reinterpret_cast<const float4*>(krow + c);
#pragma unroll
          for (int r = 0; r < kQueriesPerThread; ++r) {
            const float4 q = *reinterpret_cast<const float4*>(qrows + r * kDimChunk + c);
            acc[r] = fmaf(q.x, k.x, acc[r]);
            acc[r] = fmaf(q.y, k.y, acc[r]);
            acc[r] = fmaf(q.z, k.z, acc[r]);
            acc[r] = fmaf(q.w, k.w, acc[r]);
          }
        }
      }
      __syncthreads();
    }
  }
};

// Tensor cores (nvcuda::wmma, bf16 in, fp32 accumulate), head_dim kD of 64
// or 128. Each fp32 query is split into two bf16 parts, hi = bf16(q) and
// lo = bf16(q - hi), and q . k = hi . k + lo . k: a bf16 key times a bf16
// part is exact in fp32, and hi + lo carries 16 of the query's 24
// significand bits, so a logit differs from the fp32 CUDA-core sum by at
// most 2^-17 of sum |q_i k_i| besides the order of the fp32 additions
// (the bound the scoring test's tolerance covers many times over). That
// split costs a second product and keeps the scores the CPU policy's, which
// a single bf16 rounding of the queries (2^-9) would not.
//
// Layout: kChunks chunks of 32 keys (several for the probability pass, so
// one staged query tile serves them all) and the tile's 32 queries (both
// parts) stay in shared memory as bf16 rows of kD + 8 elements (a 16-byte
// shift per row, so the 8 rows a matrix load reads at once fall in distinct
// banks); warp w
// computes the 16 x 16 block (queries 16 (w / 2) .., slots 16 (w % 2) ..)
// and stores it to a fp32 logit tile, from which each thread reads its 8
// values in SimtTile's arrangement (CUDA leaves an accumulator's lane layout
// unspecified, so the tile goes through memory).
template <int kD, int kChunks>
struct MmaTile {
  static_assert(kD % 16 == 0 && kD % 8 == 0, "whole 16-wide k steps and 16-byte rows");
  static constexpr int kKeyChunks = kChunks;
  static constexpr int kLd = kD + 8;                // bf16 rows
  static constexpr int kLogitLd = kChunkSlots + 4;  // fp32 rows
  struct Smem {
    __align__(32) __nv_bfloat16 keys[kChunks * kChunkSlots * kLd];
    __align__(32) __nv_bfloat16 q_hi[kTileQueries * kLd];
    __align__(32) __nv_bfloat16 q_lo[kTileQueries * kLd];
    __align__(32) float logits[kTileQueries * kLogitLd];
  };
  static_assert(kTileQueries == 32 && kChunkSlots == 32 && kWarps == 4, "a 2 x 2 grid of 16 x 16 blocks");
  static_assert(sizeof(Smem) <= 48 * 1024, "static shared memory");

  // The barrier first: the previous Logits may still read q_hi / q_lo.
  __device__ static void StageQueries(const float* qh, int nq, int q0, int, Smem& sm) {
    __syncthreads();
    constexpr int kVecs = kD / 4;
    for (int idx = threadIdx.x; idx < kTileQueries * kVecs; idx += kThreads) {
      const int j = idx / kVecs, c = 4 * (idx - j * kVecs);
      const int q = q0 + j;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (q < nq) v = *reinterpret_cast<const float4*>(qh + static_cast<size_t>(q) * kD + c);
      // Pairs, and 8-byte stores (j * kLd + c is a multiple of 4 elements).
      const __nv_bfloat162 hi01 = __floats2bfloat162_rn(v.x, v.y), hi23 = __floats2bfloat162_rn(v.z, v.w);
      const float2 h01 = __bfloat1622float2(hi01), h23 = __bfloat1622float2(hi23);
      const __nv_bfloat162 lo01 = __floats2bfloat162_rn(v.x - h01.x, v.y - h01.y);
      const __nv_bfloat162 lo23 = __floats2bfloat162_rn(v.z - h23.x, v.w - h23.y);
      __nv_bfloat162* hi = reinterpret_cast<__nv_bfloat162*>(sm.q_hi + j * kLd + c);
      __nv_bfloat162* lo = reinterpret_cast<__nv_bfloat162*>(sm.q_lo + j * kLd + c);
      hi[0] = hi01, hi[1] = hi23, lo[0] = lo01, lo[1] = lo23;
    }
  }

  // 16-byte copies of the bf16 rows as stored (a row of kD bf16 starts on a
  // 16-byte boundary: KvIndex is a multiple of head_dim); zeros past n_slots.
  __device__ static void StageKeys(const KeyRows& rows, int c_buf, int, Smem& sm) {
    __syncthreads();
    __nv_bfloat16* keys = sm.keys + c_buf * kChunkSlots * kLd;
    constexpr int kVecs = kD / 8;
    for (int idx = threadIdx.x; idx < kChunkSlots * kVecs; idx += kThreads) {
      const int s = idx / kVecs, c = 8 * (idx - s * kVecs);
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (rows.row[s] != nullptr) v = *reinterpret_cast<const uint4*>(rows.row[s] + c);
      *reinterpret_cast<uint4*>(keys + s * kLd + c) = v;
    }
  }

  __device__ static void Logits(const float*, int nq, int q0, int, const KeyRows&, int c_buf, Smem& sm,
                                float (&acc)[kQueriesPerThread]) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int qr = 16 * (warp / 2), sc = 16 * (warp % 2);
    const __nv_bfloat16* keys = sm.keys + c_buf * kChunkSlots * kLd;
    __syncthreads();     // both inputs staged
    if (q0 + qr < nq) {  // uniform in the warp: its 16 query rows hold at least one query
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.0f);
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
#pragma unroll
      for (int k = 0; k < kD; k += 16) {
        wmma::load_matrix_sync(b, keys + sc * kLd + k, kLd);  // key s, dim k: keys[s * kLd + k]
        wmma::load_matrix_sync(a, sm.q_hi + qr * kLd + k, kLd);
        wmma::mma_sync(c, a, b, c);
        wmma::load_matrix_sync(a, sm.q_lo + qr * kLd + k, kLd);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(sm.logits + qr * kLogitLd + sc, c, kLogitLd, wmma::mem_row_major);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kQueriesPerThread; ++r) {
      const int row = warp * kQueriesPerThread + r;
      acc[r] = q0 + row < nq ? sm.logits[row * kLogitLd + lane] : 0.0f;
    }
  }
};

}  // namespace beacon::beacon_logits

#endif  // BEACON_KERNELS_CUDA_BEACON_LOGIT_TILES_CUH_
