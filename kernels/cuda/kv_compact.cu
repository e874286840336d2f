#include "kernels/cuda/kv_compact.h"

namespace beacon {
namespace {

constexpr int kThreads = 256;
// Registers per thread per round: kUnitsPerThread vectors of K/V data and
// kPosPerThread positions. A round moves as many rows as they hold.
constexpr int kUnitsPerThread = 8;
constexpr int kPosPerThread = 4;

// Grid (n_kv_heads, n_layers). Vec: the copy unit, uint4 (8 bf16) when
// head_dim % 8 == 0 and the bases are 16-byte aligned, else uint32 (2 bf16).
template <typename Vec>
__global__ void __launch_bounds__(kThreads) CompactKernel(PagedKv kv, const int32_t* __restrict__ block_table,
                                                          const int32_t* __restrict__ keep, int32_t n_keep) {
  const int h = blockIdx.x, layer = blockIdx.y, tid = threadIdx.x;
  const PagedKvLayout& l = kv.layout;
  const int bs = l.block_size;
  const int units = l.head_dim * static_cast<int>(sizeof(__nv_bfloat16)) / static_cast<int>(sizeof(Vec));
  const int row_units = 2 * units;  // K then V
  int rows_per_round = kThreads * kUnitsPerThread / row_units;
  if (rows_per_round > kThreads * kPosPerThread) rows_per_round = kThreads * kPosPerThread;
  const int32_t* kp = keep + (static_cast<size_t>(layer) * l.n_kv_heads + h) * n_keep;

  auto row_ptr = [&](bool is_v, int32_t slot) {
    return reinterpret_cast<Vec*>((is_v ? kv.v : kv.k) + l.KvIndex(layer, block_table[slot / bs], h, slot % bs));
  };
  auto pos_ptr = [&](int32_t slot) { return kv.pos + l.PosIndex(layer, block_table[slot / bs], h, slot % bs); };

  for (int32_t i0 = 0; i0 < n_keep; i0 += rows_per_round) {
    const int rows = n_keep - i0 < rows_per_round ? n_keep - i0 : rows_per_round;
    // keep is strictly ascending with keep[i] >= i: if the round's last row
    // stays in place, every row up to it does (e.g. a kept prompt).
    if (kp[i0 + rows - 1] == i0 + rows - 1) continue;  // uniform in the block
    Vec buf[kUnitsPerThread];
    int32_t pbuf[kPosPerThread];
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      const int u = tid + k * kThreads, r = u / row_units;
      if (r >= rows) continue;
      const int32_t to = i0 + r, from = kp[to];
      if (from == to) continue;
      const int w = u - r * row_units;
      buf[k] = row_ptr(w >= units, from)[w >= units ? w - units : w];
    }
#pragma unroll
    for (int k = 0; k < kPosPerThread; ++k) {
      const int r = tid + k * kThreads;
      if (r >= rows) continue;
      const int32_t to = i0 + r, from = kp[to];
      if (from != to) pbuf[k] = *pos_ptr(from);
    }
    __syncthreads();  // every source of the round is read before any write
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      const int u = tid + k * kThreads, r = u / row_units;
      if (r >= rows) continue;
      const int32_t to = i0 + r, from = kp[to];
      if (from == to) continue;
      const int w = u - r * row_units;
      row_ptr(w >= units, to)[w >= units ? w - units : w] = buf[k];
    }
#pragma unroll
    for (int k = 0; k < kPosPerThread; ++k) {
      const int r = tid + k * kThreads;
      if (r >= rows) continue;
      const int32_t to = i0 + r, from = kp[to];
      if (from != to) *pos_ptr(to) = pbuf[k];
    }
    // No barrier needed here: the next round reads only slots above this
    // round's destinations, and every read of this round preceded the
    // barrier above, which every thread has passed.
  }
}

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

cudaError_t LaunchCompact(const PagedKv& kv, const int32_t* block_table, const int32_t* keep, int32_t n_keep,
                          int32_t n_slots, cudaStream_t stream) {
  const PagedKvLayout& l = kv.layout;
  if (n_keep < 0 || n_keep > n_slots || l.n_layers <= 0 || l.n_kv_heads <= 0 || l.n_layers > 65535 ||
      l.n_kv_heads > 65535 || l.block_size <= 0 || l.head_dim < 2 || l.head_dim > 1024 || l.head_dim % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  if (n_keep == 0) return cudaSuccess;
  if (kv.k == nullptr || kv.v == nullptr || kv.pos == nullptr || block_table == nullptr || keep == nullptr ||
      !Aligned(kv.k, 4) || !Aligned(kv.v, 4)) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(l.n_kv_heads, l.n_layers);
  if (l.head_dim % 8 == 0 && Aligned(kv.k, 16) && Aligned(kv.v, 16)) {
    CompactKernel<uint4><<<grid, kThreads, 0, stream>>>(kv, block_table, keep, n_keep);
  } else {
    CompactKernel<uint32_t><<<grid, kThreads, 0, stream>>>(kv, block_table, keep, n_keep);
  }
  return cudaGetLastError();
}

}  // namespace beacon
