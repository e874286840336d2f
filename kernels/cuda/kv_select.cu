#include "kernels/cuda/kv_select.h"

namespace beacon {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kRadixBits = 8;
constexpr int kBins = 1 << kRadixBits;

// The workspace keeps one uint32 per slot: 0 for a protected slot, else the
// score's order word (never 0, see ScoreOrder). A slot's key is
// (order << 32) | slot: unique, and higher <=> better under SelectKeep.
constexpr uint32_t kProtected = 0;

// Monotone in the float order, -0 mapped as +0 (equal in SelectKeep's
// comparison); at least 1 (only a negative NaN would map to 0).
__device__ inline uint32_t ScoreOrder(float score) {
  if (score == 0.0f) score = 0.0f;
  const uint32_t bits = __float_as_uint(score);
  const uint32_t ord = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ord == 0 ? 1 : ord;
}

__device__ inline uint64_t SlotKey(uint32_t order, int32_t slot) {
  return (static_cast<uint64_t>(order) << 32) | static_cast<uint32_t>(slot);
}

// Exclusive prefix count of `flag` over the block, in thread order; returns
// the thread's offset and stores the block total in *total (valid for every
// thread after the call). Contains two __syncthreads.
__device__ int BlockExclusiveCount(bool flag, int* warp_sums, int* total) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  const int in_warp = __popc(ballot & ((1u << lane) - 1u));
  if (lane == 0) warp_sums[warp] = __popc(ballot);
  __syncthreads();
  if (warp == 0) {
    const int v = lane < kWarps ? warp_sums[lane] : 0;
    int incl = v;
    for (int off = 1; off < 32; off <<= 1) {
      const int o = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += o;
    }
    if (lane < kWarps) warp_sums[lane] = incl - v;  // exclusive
    if (lane == kWarps - 1) *total = incl;
  }
  __syncthreads();
  return warp_sums[warp] + in_warp;
}

// Grid (n_kv_heads, n_layers).
__global__ void __launch_bounds__(kThreads)
    SelectKeepKernel(const float* __restrict__ scores, const int32_t* __restrict__ pos, PagedKvLayout layout,
                     const int32_t* __restrict__ block_table, int32_t n, DeviceProtection prot, int32_t n_keep,
                     int32_t* __restrict__ keep, uint32_t* __restrict__ order_ws) {
  __shared__ int hist[kBins];
  __shared__ int warp_sums[kWarps];
  __shared__ int total;
  __shared__ int n_protected;
  __shared__ int digit_s, remaining_s;
  const int h = blockIdx.x, layer = blockIdx.y, tid = threadIdx.x;
  const size_t row = static_cast<size_t>(layer) * layout.n_kv_heads + h;
  const float* sc = scores + row * n;
  uint32_t* order = order_ws + row * n;
  int32_t* out = keep + row * n_keep;
  if (tid == 0) n_protected = 0;
  __syncthreads();

  // Keys and the protected count.
  int my_protected = 0;
  for (int32_t s = tid; s < n; s += kThreads) {
    const int32_t p = pos[layout.PosIndex(layer, block_table[s / layout.block_size], h, s % layout.block_size)];
    const bool is_prot = (prot.keep_prompt && p < prot.prompt_len) || p < prot.sinks || s >= n - prot.window;
    order[s] = is_prot ? kProtected : ScoreOrder(sc[s]);
    my_protected += is_prot;
  }
  atomicAdd(&n_protected, my_protected);
  __syncthreads();
  const bool overflow = n_protected >= n_keep;

  // Radix select: the want-th highest key among the unprotected ones, most
  // significant byte first. Keys are distinct, so exactly `want` keys are
  // >= the threshold.
  uint64_t threshold = 0;
  if (!overflow) {
    int remaining = n_keep - n_protected;
    uint64_t prefix = 0, mask = 0;
    for (int shift = 64 - kRadixBits; shift >= 0; shift -= kRadixBits) {
      for (int b = tid; b < kBins; b += kThreads) hist[b] = 0;
      __syncthreads();
      for (int32_t s = tid; s < n; s += kThreads) {
        if (order[s] == kProtected) continue;
        const uint64_t k = SlotKey(order[s], s);
        if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & (kBins - 1)], 1);
      }
      __syncthreads();
      if (tid == 0) {
        int above = 0, b = kBins - 1;
        for (; b > 0 && above + hist[b] < remaining; --b) above += hist[b];
        digit_s = b;
        remaining_s = remaining - above;
      }
      __syncthreads();
      prefix |= static_cast<uint64_t>(digit_s) << shift;
      mask |= static_cast<uint64_t>(kBins - 1) << shift;
      remaining = remaining_s;
      __syncthreads();  // digit_s / remaining_s / hist are rewritten next pass
    }
    threshold = prefix;
  }

  // Kept slots in ascending order.
  int32_t written = 0;
  for (int32_t base = 0; base < n; base += kThreads) {
    const int32_t s = base + tid;
    bool kept = false;
    if (s < n) {
      const uint32_t o = order[s];
      kept = o == kProtected || (!overflow && SlotKey(o, s) >= threshold);
    }
    const int offset = BlockExclusiveCount(kept, warp_sums, &total);
    if (kept && written + offset < n_keep) out[written + offset] = s;
    written += total;
    __syncthreads();  // warp_sums / total are rewritten next round
  }
}

}  // namespace

size_t SelectKeepWorkspaceBytes(int n_layers, int n_kv_heads, int32_t n_slots) {
  if (n_layers < 0 || n_kv_heads < 0 || n_slots < 0) return 0;
  return static_cast<size_t>(n_layers) * n_kv_heads * n_slots * sizeof(uint32_t);
}

cudaError_t LaunchSelectKeep(const float* scores, const PagedKv& kv, const int32_t* block_table, int32_t n_slots,
                             const DeviceProtection& prot, int32_t n_keep, int32_t* keep, void* workspace,
                             size_t workspace_bytes, cudaStream_t stream) {
  const PagedKvLayout& l = kv.layout;
  if (n_slots < 0 || n_keep < 0 || n_keep > n_slots || l.n_layers <= 0 || l.n_kv_heads <= 0 || l.n_layers > 65535 ||
      l.n_kv_heads > 65535 || l.block_size <= 0) {
    return cudaErrorInvalidValue;
  }
  if (n_keep == 0) return cudaSuccess;
  if (scores == nullptr || kv.pos == nullptr || block_table == nullptr || keep == nullptr || workspace == nullptr ||
      workspace_bytes < SelectKeepWorkspaceBytes(l.n_layers, l.n_kv_heads, n_slots)) {
    return cudaErrorInvalidValue;
  }
  SelectKeepKernel<<<dim3(l.n_kv_heads, l.n_layers), kThreads, 0, stream>>>(
      scores, kv.pos, l, block_table, n_slots, prot, n_keep, keep, static_cast<uint32_t*>(workspace));
  return cudaGetLastError();
}

}  // namespace beacon
