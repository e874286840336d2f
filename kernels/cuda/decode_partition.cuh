// The split-K partition rule and grid of decode attention, shared by its
// kernels (decode_attention.cu: the CUDA-core split and the merge;
// decode_attention_mma.cu: the tensor-core split). The split kernels and
// the merge must cut a token's slots identically, so the rule lives here.
// Header-only (device code cannot be shared without relocatable device
// code); launches stay in the .cu files, which the emulator's gen.py rewrites.
#ifndef BEACON_KERNELS_CUDA_DECODE_PARTITION_CUH_
#define BEACON_KERNELS_CUDA_DECODE_PARTITION_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_attention.h"

namespace beacon {
namespace decode_partition {

constexpr int kMinKeys = 256;
constexpr int kAlign = 64;  // a multiple of every split kernel's tile

// Keys per partition of a token that attends to n slots:
// roundup(max(kMinKeys, ceil(n / max_splits)), kAlign).
__device__ __forceinline__ int Length(int n, int max_splits) {
  int len = 1 + (n - 1) / max_splits;
  len = len < kMinKeys ? kMinKeys : len;
  return (len + kAlign - 1) / kAlign * kAlign;
}

// One split block's work: token t's query heads [qh0, qh0 + gb) (of KV head
// kv_head) over keys [begin, end) of its n slots, partition `split` of
// n_parts.
struct SplitWork {
  int64_t t;
  int kv_head, qh0, gb, n, split, n_parts, begin, end;
};

// The work of the running block, on SplitGrid(p, heads_per_block, ...).
// False when it has none: a partition past the token's last key, or n <= 0
// (a contract violation), for which partition 0 writes zeros (defined output
// instead of garbage) over the block's heads of `out` (head_dim d).
__device__ __forceinline__ bool SplitWorkOf(const PagedAttentionParams& p, int heads_per_block, int max_splits, int d,
                                            SplitWork* w) {
  w->t = blockIdx.x;
  const int group = p.n_q_heads / p.kv.layout.n_kv_heads;
  const int head_chunks = (group + heads_per_block - 1) / heads_per_block;
  w->kv_head = blockIdx.y / head_chunks;
  const int g0 = (blockIdx.y % head_chunks) * heads_per_block;
  w->gb = min(heads_per_block, group - g0);
  w->qh0 = w->kv_head * group + g0;
  w->split = blockIdx.z;
  w->n = p.tok_slot[w->t] + 1;
  if (w->n <= 0) {
    if (w->split == 0) {
      __nv_bfloat16* out = p.out + (w->t * p.n_q_heads + w->qh0) * static_cast<int64_t>(d);
      for (int i = threadIdx.x; i < w->gb * d; i += blockDim.x) out[i] = __float2bfloat16(0.f);
    }
    return false;
  }
  const int len = Length(w->n, max_splits);
  w->n_parts = (w->n - 1) / len + 1;
  w->begin = w->split * len;
  w->end = min(w->n, w->begin + len);
  return w->split < w->n_parts;
}

// The split kernels' grid: (token, KV head x chunk of heads_per_block query
// heads, partition). It depends on the batch only, so graphs replay as
// contexts grow.
inline dim3 SplitGrid(const PagedAttentionParams& p, int heads_per_block, int max_splits) {
  const int group = p.n_q_heads / p.kv.layout.n_kv_heads;
  const int head_chunks = (group + heads_per_block - 1) / heads_per_block;
  return dim3(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.kv.layout.n_kv_heads * head_chunks),
              static_cast<unsigned>(max_splits));
}

// Raises `kernel`'s dynamic shared memory limit to `smem` when it is over
// the default 48 KiB.
template <class Kernel>
cudaError_t AllowSharedMemory(Kernel* kernel, size_t smem) {
  if (smem <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
}

}  // namespace decode_partition
}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_DECODE_PARTITION_CUH_
