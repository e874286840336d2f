// Block-wide radix selection and inverse-CDF drawing for one row of a
// vocabulary, used by sampling.cu only (private to it: device code cannot be
// shared across .cu files without relocatable device code).
//
// Every routine here is called by all kBlockThreads threads of the block with
// the same arguments (block-uniform control flow), synchronises internally,
// and uses the one SelectShared instance of the block. Row elements are
// addressed through functors, so the same selection serves logits, weights
// and token ids without materialising any of them in global memory.
//
// All sums are integers (counts, fixed-point masses), so every result is
// independent of the order of atomic additions: bitwise deterministic.
#ifndef BEACON_KERNELS_CUDA_SAMPLING_SELECT_CUH_
#define BEACON_KERNELS_CUDA_SAMPLING_SELECT_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace beacon {
namespace sampling_internal {

using u64 = unsigned long long;  // the type CUDA's 64-bit atomics and shuffles take

constexpr int kBlockThreads = 512;
constexpr int kBlockWarps = kBlockThreads / 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
static_assert(kBlockWarps <= 32, "the draw scans one warp sum per lane");

struct SelectShared {
  uint32_t count[256];  // histogram of the current digit: tokens
  u64 mass[256];        // and their fixed-point mass (mass selection only)
  u64 warp_value[32];   // per-warp partials (reductions, draw)
  u64 need;             // mass selection: target mass, broadcast by warp 0
  u64 above;            // picked digit: count/mass of the digits above it
  u64 digit_mass;
  uint32_t digit;
  uint32_t digit_count;
  int pick_warp;  // draw: the warp whose range holds the draw
  u64 pick_base;  // draw: mass of the ranges before it
  u64 pick_u;     // draw: the scaled uniform
  int token;      // draw: result
};

__device__ __forceinline__ SelectShared& Shared() {
  __shared__ SelectShared shared;
  return shared;
}

__device__ __forceinline__ int Lane() { return threadIdx.x & 31; }
__device__ __forceinline__ int Warp() { return threadIdx.x >> 5; }

__device__ __forceinline__ u64 WarpSum(u64 v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

__device__ __forceinline__ u64 WarpMax(u64 v) {
  for (int off = 16; off > 0; off >>= 1) {
    const u64 o = __shfl_xor_sync(kFullMask, v, off);
    v = o > v ? o : v;
  }
  return v;
}

__device__ __forceinline__ u64 WarpInclusiveSum(u64 v) {
  for (int off = 1; off < 32; off <<= 1) {
    const u64 o = __shfl_up_sync(kFullMask, v, off);
    if (Lane() >= off) v += o;
  }
  return v;
}

__device__ u64 BlockMax(u64 v) {
  SelectShared& sh = Shared();
  v = WarpMax(v);
  if (Lane() == 0) sh.warp_value[Warp()] = v;
  __syncthreads();
  if (Warp() == 0) {
    u64 w = Lane() < kBlockWarps ? sh.warp_value[Lane()] : 0;
    w = WarpMax(w);
    if (Lane() == 0) sh.pick_base = w;
  }
  __syncthreads();
  const u64 result = sh.pick_base;
  __syncthreads();  // the next user of pick_base / warp_value waits for all reads
  return result;
}

// Adds this lane's token to the histogram. REQUIRES: all 32 lanes of the warp
// call it together (inactive lanes with active == false). Lanes with equal
// digits are merged first: logits and weights cluster in a few digits, and
// unmerged shared-memory atomics on one address serialise.
__device__ __forceinline__ void AddToHistogram(bool active, uint32_t digit, u64 mass, bool with_mass) {
  SelectShared& sh = Shared();
  const uint32_t tag = active ? digit : 0xFFFFFFFFu;
  const unsigned peers = __match_any_sync(kFullMask, tag);
  const bool leader = active && (__ffs(peers) - 1) == Lane();
  if (leader) atomicAdd(&sh.count[digit], static_cast<uint32_t>(__popc(peers)));
  if (!with_mass) return;
  const unsigned leaders = __ballot_sync(kFullMask, leader);
  if (__popc(leaders) <= 4) {  // few distinct digits: one warp sum per digit
    for (unsigned rest = leaders; rest != 0; rest &= rest - 1) {
      const int src = __ffs(rest) - 1;
      const uint32_t d = __shfl_sync(kFullMask, tag, src);
      const u64 sum = WarpSum(active && tag == d ? mass : 0);
      if (Lane() == src && sum != 0) atomicAdd(&sh.mass[d], sum);
    }
  } else if (active && mass != 0) {  // spread out: contention is low anyway
    atomicAdd(&sh.mass[digit], mass);
  }
}

// Warp 0 only. Scans the digits from 255 down and picks the first non-empty
// one at which the running value (counts, or masses if kMass) reaches `need`;
// when none does (cannot happen with exact sums, kept for safety), the lowest
// non-empty digit. Publishes digit, above, digit_count, digit_mass.
template <bool kMass>
__device__ void PickDigit(u64 need) {
  SelectShared& sh = Shared();
  const int lane = Lane();
  u64 local = 0;
  for (int j = 0; j < 8; ++j) {
    const int d = 255 - 8 * lane - j;
    local += kMass ? sh.mass[d] : sh.count[d];
  }
  u64 run = WarpInclusiveSum(local) - local;
  int found = -1, lowest = -1;
  u64 found_above = 0, lowest_above = 0;
  for (int j = 0; j < 8; ++j) {
    const int d = 255 - 8 * lane - j;
    const u64 v = kMass ? sh.mass[d] : sh.count[d];
    if (sh.count[d] != 0) {
      if (found < 0 && run + v >= need) {
        found = d;
        found_above = run;
      }
      lowest = d;
      lowest_above = run;
    }
    run += v;
  }
  const unsigned hit = __ballot_sync(kFullMask, found >= 0);
  const unsigned nonempty = __ballot_sync(kFullMask, lowest >= 0);
  int src = 0;
  if (hit != 0) {
    src = __ffs(hit) - 1;
  } else if (nonempty != 0) {
    src = 31 - __clz(nonempty);
  }
  if (lane == src) {
    const int d = hit != 0 ? found : (lowest >= 0 ? lowest : 0);
    sh.digit = static_cast<uint32_t>(d);
    sh.above = hit != 0 ? found_above : lowest_above;
    sh.digit_count = sh.count[d];
    sh.digit_mass = sh.mass[d];
  }
}

__device__ __forceinline__ void ClearHistogram() {
  SelectShared& sh = Shared();
  for (int d = threadIdx.x; d < 256; d += kBlockThreads) {
    sh.count[d] = 0;
    sh.mass[d] = 0;
  }
}

// Result of a selection: keep the keys above `key`, and of the keys equal to
// it either all (`all`) or the `rem` of them with the lowest ids.
struct SelectResult {
  uint32_t key;
  uint32_t rem;
  bool all;
};

// The `k`-th largest key (1-based, with multiplicity) among the active
// elements; REQUIRES 1 <= k <= their number. key_of(i, &key) returns false for
// an inactive element. Digits of 8 bits from bit `top_shift` down: bits above
// top_shift + 7 must be 0 in every key. Stops early once the picked digit's
// elements are exactly the ones still needed: then `key` is the digit's lower
// bound and every active key >= it is kept.
template <typename KeyFn>
__device__ SelectResult CountSelect(int n, uint32_t k, int top_shift, KeyFn key_of) {
  SelectShared& sh = Shared();
  uint32_t prefix = 0, mask = 0, rem = k;
  for (int shift = top_shift; shift >= 0; shift -= 8) {
    ClearHistogram();
    __syncthreads();
    for (int base = 0; base < n; base += kBlockThreads) {
      const int i = base + static_cast<int>(threadIdx.x);
      uint32_t key = 0;
      const bool active = i < n && key_of(i, &key) && (key & mask) == prefix;
      AddToHistogram(active, (key >> shift) & 0xFFu, 0, false);
    }
    __syncthreads();
    if (Warp() == 0) PickDigit<false>(rem);
    __syncthreads();
    const uint32_t digit = sh.digit, digit_count = sh.digit_count;
    rem -= static_cast<uint32_t>(sh.above);
    prefix |= digit << shift;
    mask |= 0xFFu << shift;
    if (digit_count <= rem) return {prefix, rem, true};  // == rem; <= for safety
  }
  return {prefix, rem, false};
}

// Weighted selection: among the active elements sorted by key descending,
// the key at which the cumulative mass first reaches need =
// ceil(fraction * total) (clamped to [0, total]). w_of(i, &key, &mass) returns
// false for an inactive element. Keys use all 32 bits. `rem` of the result
// counts how many of the equal keys (lowest ids first) the prefix takes.
template <typename WeightFn>
__device__ SelectResult MassSelect(int n, float fraction, WeightFn w_of) {
  SelectShared& sh = Shared();
  uint32_t prefix = 0, mask = 0;
  u64 need = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    ClearHistogram();
    __syncthreads();
    for (int base = 0; base < n; base += kBlockThreads) {
      const int i = base + static_cast<int>(threadIdx.x);
      uint32_t key = 0;
      u64 mass = 0;
      const bool active = i < n && w_of(i, &key, &mass) && (key & mask) == prefix;
      AddToHistogram(active, (key >> shift) & 0xFFu, active ? mass : 0, true);
    }
    __syncthreads();
    if (Warp() == 0) {
      if (shift == 24) {  // the first pass sees every active element
        u64 total = 0;
        for (int j = 0; j < 8; ++j) total += sh.mass[8 * Lane() + j];
        total = WarpSum(total);
        const double t = static_cast<double>(fraction) * static_cast<double>(total);
        need = !(t > 0.0) ? 0 : static_cast<u64>(ceil(t));
        if (need > total) need = total;
        if (Lane() == 0) sh.need = need;
      }
      PickDigit<true>(need);
    }
    __syncthreads();
    if (shift == 24) need = sh.need;  // warp 0 holds it already; the rest read it
    const u64 above = sh.above;
    need = need > above ? need - above : 0;  // still needed within the picked digit
    const uint32_t digit_count = sh.digit_count;
    const u64 digit_mass = sh.digit_mass;
    prefix |= sh.digit << shift;
    mask |= 0xFFu << shift;
    if (digit_count <= 1) return {prefix, digit_count, true};
    if (shift == 0) {
      // All digit_count elements share this key, hence the same mass.
      const u64 each = digit_mass / digit_count;
      u64 take = each == 0 ? digit_count : (need + each - 1) / each;
      if (take < 1) take = 1;
      if (take >= digit_count) return {prefix, digit_count, true};
      return {prefix, static_cast<uint32_t>(take), false};
    }
  }
  return {prefix, 0, true};  // not reached
}

// Inverse-CDF draw in token order: with Q = sum of mass_of(i) over [0, n)
// and u = floor(bits * Q / 2^64), the lowest i whose inclusive prefix mass
// exceeds u; `fallback` when Q == 0. Each warp owns a contiguous range of
// tokens (read coalesced), so only one range is rescanned to find the token.
template <typename MassFn>
__device__ int DrawByMass(int n, u64 bits, int fallback, MassFn mass_of) {
  SelectShared& sh = Shared();
  const int seg = ((n + kBlockWarps - 1) / kBlockWarps + 31) / 32 * 32;
  const int begin = Warp() * seg < n ? Warp() * seg : n;
  const int end = begin + seg < n ? begin + seg : n;
  u64 sum = 0;
  for (int i = begin + Lane(); i < end; i += 32) sum += mass_of(i);
  sum = WarpSum(sum);
  if (Lane() == 0) sh.warp_value[Warp()] = sum;
  __syncthreads();
  if (Warp() == 0) {
    const u64 v = Lane() < kBlockWarps ? sh.warp_value[Lane()] : 0;
    const u64 incl = WarpInclusiveSum(v);
    const u64 total = __shfl_sync(kFullMask, incl, 31);
    const u64 u = __umul64hi(bits, total);  // < total whenever total > 0
    const unsigned hit = __ballot_sync(kFullMask, incl > u);
    const int src = hit != 0 ? __ffs(hit) - 1 : -1;
    const u64 base = __shfl_sync(kFullMask, incl - v, src < 0 ? 0 : src);
    if (Lane() == 0) {
      sh.pick_warp = total == 0 ? -1 : src;
      sh.pick_base = base;
      sh.pick_u = u;
      sh.token = fallback;
    }
  }
  __syncthreads();
  if (Warp() == sh.pick_warp) {
    const u64 u = sh.pick_u;
    u64 run = sh.pick_base;
    int token = -1;
    for (int chunk = begin; chunk < end; chunk += 32) {
      const int i = chunk + Lane();
      const u64 incl = run + WarpInclusiveSum(i < end ? mass_of(i) : 0);
      const unsigned hit = __ballot_sync(kFullMask, incl > u);
      if (hit != 0) {
        token = chunk + __ffs(hit) - 1;
        break;
      }
      run = __shfl_sync(kFullMask, incl, 31);
    }
    if (Lane() == 0 && token >= 0) sh.token = token;
  }
  __syncthreads();
  return sh.token;
}

}  // namespace sampling_internal
}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_SAMPLING_SELECT_CUH_
