#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_select.cuh"

namespace beacon {
namespace {

using sampling_internal::BlockMax;
using sampling_internal::CountSelect;
using sampling_internal::DrawByMass;
using sampling_internal::kBlockThreads;
using sampling_internal::MassSelect;
using sampling_internal::SelectResult;
using sampling_internal::u64;

// One block per row throughout: the row is re-read from global memory (L2)
// once per selection pass instead of being staged anywhere, which keeps the
// kernel free of scratch memory and every launch graph-capturable.

// NaN -> -inf (never chosen), -0 -> +0 (so that equal floats have equal keys).
__device__ __forceinline__ float Sanitize(float x) {
  if (x != x) return -INFINITY;
  return x == 0.0f ? 0.0f : x;
}

// Order-preserving map of a (sanitised) float to uint32: a < b <=> key(a) < key(b).
__device__ __forceinline__ uint32_t OrderedKey(float x) {
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float KeyToFloat(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) != 0 ? (k & 0x7FFFFFFFu) : ~k);
}

// Argmax as a max over (key, ~id): the larger value, then the lower id. Every
// real element packs above 0 (the smallest key, -inf's, is 0x007FFFFF).
__device__ __forceinline__ u64 PackArgmax(float raw, int i) {
  return (static_cast<u64>(OrderedKey(Sanitize(raw))) << 32) | static_cast<u64>(0xFFFFFFFFu - static_cast<uint32_t>(i));
}
__device__ __forceinline__ int PackedId(u64 packed) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(packed));
}

__device__ u64 RowArgmax(const float* __restrict__ row, int vocab) {
  u64 best = 0;
  if ((reinterpret_cast<uintptr_t>(row) & 15u) == 0 && (vocab & 3) == 0) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int j = threadIdx.x; j < vocab / 4; j += kBlockThreads) {
      const float4 v = __ldg(row4 + j);
      const int i = 4 * j;
      u64 p = PackArgmax(v.x, i);
      best = p > best ? p : best;
      p = PackArgmax(v.y, i + 1);
      best = p > best ? p : best;
      p = PackArgmax(v.z, i + 2);
      best = p > best ? p : best;
      p = PackArgmax(v.w, i + 3);
      best = p > best ? p : best;
    }
  } else {
    for (int i = threadIdx.x; i < vocab; i += kBlockThreads) {
      const u64 p = PackArgmax(__ldg(row + i), i);
      best = p > best ? p : best;
    }
  }
  return BlockMax(best);
}

// Keep the keys above `key`, and those equal to it with id <= id_cut.
struct Threshold {
  uint32_t key = 0;
  int id_cut = INT_MAX;  // default: keep everything
  __device__ bool Keep(uint32_t k, int id) const { return k > key || (k == key && id <= id_cut); }
};

// Highest digit shift CountSelect needs for keys in [0, vocab).
__device__ __forceinline__ int IdTopShift(int vocab) {
  const int bits = vocab > 1 ? 32 - __clz(vocab - 1) : 0;
  return bits <= 8 ? 0 : ((bits - 1) / 8) * 8;
}

// The `rem` lowest ids among the active elements, as an id cutoff. Selecting
// the largest (vocab - 1 - id) is selecting the lowest ids; ids are distinct,
// so the selection always ends with every key >= its result kept.
template <typename ActiveFn>
__device__ int LowestIdsCut(int vocab, uint32_t rem, ActiveFn active) {
  const SelectResult r = CountSelect(vocab, rem, IdTopShift(vocab), [&](int i, uint32_t* k) {
    *k = static_cast<uint32_t>(vocab - 1 - i);
    return active(i);
  });
  return vocab - 1 - static_cast<int>(r.key);
}

struct RowModel {
  const float* row;
  float max_logit;
  float inv_t;
  float mass_scale;  // 2^F
  float min_p = 0.0f;
  Threshold top_k;
  Threshold top_p;

  // engine/sampler.cc's weight: exactly 1 at the maximum (also for +inf or
  // an all -inf row), else exp of the temperature-scaled gap. NaN (only from
  // an out-of-contract temperature such as +inf) counts as 0.
  __device__ float Weight(float x) const {
    if (x == max_logit) return 1.0f;
    const float w = expf((x - max_logit) * inv_t);
    return w == w ? w : 0.0f;
  }
  __device__ u64 Mass(float w) const { return __float2ull_rz(w * mass_scale); }

  // Fixed-point mass of token i if every filter keeps it, else 0.
  __device__ u64 KeptMass(int i) const {
    const float x = Sanitize(__ldg(row + i));
    if (!top_k.Keep(OrderedKey(x), i)) return 0;
    const float w = Weight(x);
    if (!top_p.Keep(__float_as_uint(w), i)) return 0;
    return w >= min_p ? Mass(w) : 0;
  }
};

// Exactly k candidates: the k largest logits, ties to the lower id.
__device__ Threshold SelectTopK(const RowModel& m, int vocab, int k) {
  const float* row = m.row;
  const SelectResult r = CountSelect(vocab, static_cast<uint32_t>(k), 24, [&](int i, uint32_t* key) {
    *key = OrderedKey(Sanitize(__ldg(row + i)));
    return true;
  });
  Threshold t;
  t.key = r.key;
  if (!r.all) {
    t.id_cut = LowestIdsCut(vocab, r.rem, [&](int i) { return OrderedKey(Sanitize(__ldg(row + i))) == r.key; });
  }
  return t;
}

// The shortest prefix of the top-k candidates in (weight desc, id asc) order
// whose mass reaches top_p of theirs. Weights are >= +0, so their bit
// patterns order like their values.
__device__ Threshold SelectTopP(const RowModel& m, int vocab, float top_p) {
  auto weight_of = [&](int i, uint32_t* key, u64* mass) {
    const float x = Sanitize(__ldg(m.row + i));
    if (!m.top_k.Keep(OrderedKey(x), i)) return false;
    const float w = m.Weight(x);
    *key = __float_as_uint(w);
    *mass = m.Mass(w);
    return true;
  };
  const SelectResult r = MassSelect(vocab, top_p, weight_of);
  Threshold t;
  t.key = r.key;
  if (!r.all) {
    t.id_cut = LowestIdsCut(vocab, r.rem, [&](int i) {
      uint32_t key;
      u64 mass;
      return weight_of(i, &key, &mass) && key == r.key;
    });
  }
  return t;
}

__global__ void __launch_bounds__(kBlockThreads)
    ArgmaxKernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out) {
  PdlEnter();
  const u64 best = RowArgmax(logits + static_cast<int64_t>(blockIdx.x) * vocab, vocab);
  if (threadIdx.x == 0) out[blockIdx.x] = PackedId(best);
}

__global__ void __launch_bounds__(kBlockThreads)
    SampleKernel(const float* __restrict__ logits, int vocab, const DeviceSamplingParams* __restrict__ params,
                 int32_t* __restrict__ out, float mass_scale) {
  const DeviceSamplingParams p = params[blockIdx.x];  // block-uniform from here on
  RowModel m;
  m.row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const u64 best = RowArgmax(m.row, vocab);
  const int best_id = PackedId(best);
  if (!(p.temperature > 0.0f)) {
    if (threadIdx.x == 0) out[blockIdx.x] = best_id;
    return;
  }
  // The maximum over the top-k candidates is the row's maximum.
  m.max_logit = KeyToFloat(static_cast<uint32_t>(best >> 32));
  m.inv_t = 1.0f / p.temperature;
  m.mass_scale = mass_scale;
  if (p.top_k > 0 && p.top_k < vocab) m.top_k = SelectTopK(m, vocab, p.top_k);
  if (p.top_p < 1.0f) m.top_p = SelectTopP(m, vocab, p.top_p);
  // The best token has weight 1 and survives every filter: min_p is capped at
  // 1 (as Validate requires) so that this stays true.
  if (p.min_p > 0.0f) m.min_p = fminf(p.min_p, 1.0f);
  const int token =
      DrawByMass(vocab, SamplingRandomBits(p.seed, p.step), best_id, [&](int i) { return m.KeptMass(i); });
  if (threadIdx.x == 0) out[blockIdx.x] = token;
}

bool ValidShape(const float* logits, int64_t n_rows, int vocab, const int32_t* out) {
  return logits != nullptr && out != nullptr && n_rows >= 0 && n_rows <= INT32_MAX && vocab > 0 && vocab <= (1 << 30);
}

}  // namespace

size_t SamplingWorkspaceBytes(int64_t n_rows, int vocab) {
  (void)n_rows;
  (void)vocab;
  return 0;
}

cudaError_t LaunchSample(const float* logits, int64_t n_rows, int vocab, const DeviceSamplingParams* params,
                         int32_t* out_tokens, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  (void)workspace;
  if (!ValidShape(logits, n_rows, vocab, out_tokens) || params == nullptr ||
      workspace_bytes < SamplingWorkspaceBytes(n_rows, vocab)) {
    return cudaErrorInvalidValue;
  }
  if (n_rows == 0) return cudaSuccess;
  const float mass_scale = ldexpf(1.0f, SamplingMassFractionBits(vocab));
  SampleKernel<<<static_cast<unsigned>(n_rows), kBlockThreads, 0, stream>>>(logits, vocab, params, out_tokens,
                                                                            mass_scale);
  return cudaGetLastError();
}

cudaError_t LaunchArgmax(const float* logits, int64_t n_rows, int vocab, int32_t* out_tokens, KernelStream stream) {
  if (!ValidShape(logits, n_rows, vocab, out_tokens)) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  const LaunchConfig config(stream, static_cast<unsigned>(n_rows), kBlockThreads, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), ArgmaxKernel, logits, vocab, out_tokens));
}

}  // namespace beacon
