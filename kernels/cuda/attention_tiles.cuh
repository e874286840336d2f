// Device helpers shared by the paged attention kernels (decode_attention.cu,
// prefill_attention.cu): the shared-memory K/V row swizzle, the vector
// loads that widen bf16 / fp32 into registers, and the loader that copies
// tiles of a sequence's paged K/V into shared memory. Device-only, header-only:
// device code cannot be shared across .cu files without relocatable device
// code, so each kernel file includes this.
#ifndef BEACON_KERNELS_CUDA_ATTENTION_TILES_CUH_
#define BEACON_KERNELS_CUDA_ATTENTION_TILES_CUH_

#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_kv.h"

namespace beacon {
namespace attention_tiles {

constexpr float kLog2e = 1.4426950408889634f;

// Physical 16-byte chunk of logical chunk c of `key`'s row: XOR-swizzled by
// the key's low 3 bits when the row holds whole groups of 8 chunks
// (head_dim % 64 == 0), so that key-per-thread and chunk-per-thread reads
// are both free of bank conflicts.
__device__ __forceinline__ int Phys(bool swizzle, int c, int key) { return swizzle ? (c ^ (key & 7)) : c; }

// kVec bf16 (16 or 4 bytes, aligned) to fp32: a bf16 is the top half of a float.
template <int kVec>
__device__ __forceinline__ void LoadBf16(const __nv_bfloat16* src, float (&f)[kVec]) {
  if constexpr (kVec == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(src);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    static_assert(kVec == 2, "kVec is 8 or 2");
    const uint32_t w = *reinterpret_cast<const uint32_t*>(src);
    f[0] = __uint_as_float(w << 16);
    f[1] = __uint_as_float(w & 0xffff0000u);
  }
}

// kVec fp32 (32 or 8 bytes, aligned).
template <int kVec>
__device__ __forceinline__ void LoadF32(const float* src, float (&f)[kVec]) {
  if constexpr (kVec == 8) {
    const float4 a = reinterpret_cast<const float4*>(src)[0];
    const float4 b = reinterpret_cast<const float4*>(src)[1];
    f[0] = a.x;
    f[1] = a.y;
    f[2] = a.z;
    f[3] = a.w;
    f[4] = b.x;
    f[5] = b.y;
    f[6] = b.z;
    f[7] = b.w;
  } else {
    const float2 a = *reinterpret_cast<const float2*>(src);
    f[0] = a.x;
    f[1] = a.y;
  }
}

__host__ __device__ inline size_t Align16(size_t b) { return (b + 15) / 16 * 16; }

// Copies tiles of up to T keys of one sequence's KV head (K and V rows of
// head_dim d, in kVec-element 16-byte chunks) from the paged cache into a
// kStages-deep ring of shared-memory stages (stage s: T K rows, then T V
// rows, `ld` elements apart (d, or d plus padding), each row's chunks
// swizzled by Phys), with cp.async. Thread (c, key0)
// = (tid % n_chunks, tid / n_chunks) copies chunk c of keys key0,
// key0 + step, ...; the block and offset of its slot advance incrementally
// (one division per tile, not per copy). Threads past the last whole row
// of the block copy nothing. The caller commits and waits (__pipeline_*).
template <int kVec, int kStages>
struct KvTileLoader {
  const PagedKv* kv;
  const int32_t* table_row;  // the sequence's block table
  int layer, kv_head, block_size, T, d, ld;
  bool swizzle;
  __nv_bfloat16* stages;  // kStages * 2 * T * ld
  int step, c, key0;

  __device__ __forceinline__ KvTileLoader(const PagedKv& kv_, const int32_t* table_row_, int layer_, int kv_head_,
                                          int T_, int d_, int ld_, bool swizzle_, __nv_bfloat16* stages_, int n_chunks,
                                          int tid, int n_threads)
      : kv(&kv_),
        table_row(table_row_),
        layer(layer_),
        kv_head(kv_head_),
        block_size(kv_.layout.block_size),
        T(T_),
        d(d_),
        ld(ld_),
        swizzle(swizzle_),
        stages(stages_),
        step(n_threads / n_chunks),
        c(tid % n_chunks),
        key0(tid / n_chunks) {}

  // Keys [first, first + nv) into the stage of `tile` (tile % kStages).
  __device__ __forceinline__ void Issue(int tile, int first, int nv) const {
    if (key0 >= step) return;
    __nv_bfloat16* ks = stages + static_cast<size_t>(tile % kStages) * 2 * T * ld;
    __nv_bfloat16* vs = ks + T * ld;
    int blk = (first + key0) / block_size, off = (first + key0) % block_size;
    for (int key = key0; key < nv; key += step) {
      const int64_t src = kv->layout.KvIndex(layer, table_row[blk], kv_head, off) + c * kVec;
      const int dst = key * ld + Phys(swizzle, c, key) * kVec;
      __pipeline_memcpy_async(ks + dst, kv->k + src, kVec * 2);
      __pipeline_memcpy_async(vs + dst, kv->v + src, kVec * 2);
      for (off += step; off >= block_size; off -= block_size) ++blk;
    }
  }
};

}  // namespace attention_tiles
}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_ATTENTION_TILES_CUH_
