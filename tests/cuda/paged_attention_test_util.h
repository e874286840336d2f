// Shared by the paged attention kernel tests (decode_attention_test.cc,
// prefill_attention_test.cc): the tolerance, the shapes, a random bf16 paged
// cache in host memory with the device layout, and the exact (double)
// reference attention.
//
// Tolerance: inputs are the same bf16 values on both sides and the reference
// is exact (double). The kernel's fp32 scores are off by ~1e-5 absolute
// (128-term dot products of O(1) values) and its fp32 P V sums over <= 3000
// keys by ~1e-5 typically (< 1e-4 even in the worst-case linear bound for
// these magnitudes); the output's single bf16 rounding is 2^-9 relative.
// rtol 1e-2 covers the rounding with margin and atol 5e-4 the fp32 error of
// outputs near zero. Queries have stddev 2 so the softmax is peaked (scores
// of stddev 2): a missing, duplicated or misplaced key, head, partition or
// causal-mask slot moves outputs well beyond that.
#ifndef BEACON_TESTS_CUDA_PAGED_ATTENTION_TEST_UTIL_H_
#define BEACON_TESTS_CUDA_PAGED_ATTENTION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/paged_kv.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon::attention_test {

using cuda_test::RandomBf16;

constexpr double kRtol = 1e-2;
constexpr double kAtol = 5e-4;
constexpr float kQStddev = 2.0f;
constexpr int kLayers = 2;
constexpr int kLayer = 1;  // not 0, so the layer offset is exercised
constexpr int kBlockSize = 16;

struct Config {
  int nq, nkv, d;
};
// GQA groups 1, 2, 3, 4, 8 and 12 (two head chunks); head dims on the fast
// paths (64, 128), the generic 16-byte path (32, 40, 256) and the 4-byte path
// (18).
const Config kConfigs[] = {{4, 4, 32}, {8, 4, 64},  {8, 2, 128}, {16, 2, 128}, {12, 4, 64},
                           {6, 2, 40}, {24, 2, 64}, {4, 2, 18},  {8, 2, 256}};

// A bf16 paged cache with random contents, in host memory with the device
// layout. Row r of the table holds seq_slots[r] slots in distinct blocks taken
// from a shuffled list (plus spare blocks no row uses); unused entries are -1.
struct HostCache {
  PagedKvLayout layout;
  std::vector<uint16_t> k, v;
  std::vector<int32_t> table;
  int stride = 0;

  double K(int row, int32_t slot, int head, int i) const { return Bf16ToFp32(k[At(row, slot, head) + i]); }
  double V(int row, int32_t slot, int head, int i) const { return Bf16ToFp32(v[At(row, slot, head) + i]); }
  int64_t At(int row, int32_t slot, int head) const {
    return layout.KvIndex(kLayer, table[row * stride + slot / layout.block_size], head, slot % layout.block_size);
  }
};

inline HostCache MakeCache(const Config& c, const std::vector<int>& seq_slots, uint64_t seed) {
  HostCache hc;
  int total = 0, most = 0;
  for (int s : seq_slots) {
    const int blocks = (s + kBlockSize - 1) / kBlockSize;
    total += blocks;
    most = std::max(most, blocks);
  }
  hc.layout = {kLayers, c.nkv, c.d, kBlockSize, total + 7};
  hc.stride = most + 2;
  std::vector<int32_t> ids(hc.layout.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::shuffle(ids.begin(), ids.end(), rng);
  hc.table.assign(seq_slots.size() * hc.stride, -1);
  size_t next = 0;
  for (size_t r = 0; r < seq_slots.size(); ++r) {
    for (int b = 0; b * kBlockSize < seq_slots[r]; ++b) hc.table[r * hc.stride + b] = ids[next++];
  }
  const size_t n = static_cast<size_t>(kLayers) * hc.layout.layer_elems();
  hc.k = RandomBf16(n, seed + 1);
  hc.v = RandomBf16(n, seed + 2);
  return hc;
}

// The launch parameters over device copies of `hc` (k, v, the table) and of
// a batch's queries, output and token arrays; layer kLayer, scale
// 1 / sqrt(head_dim).
inline PagedAttentionParams ParamsOver(const HostCache& hc, const Config& c, const uint16_t* k, const uint16_t* v,
                                       const uint16_t* q, int64_t q_stride, uint16_t* out, const int32_t* table,
                                       const int32_t* seq, const int32_t* slot, int64_t n_tokens) {
  PagedAttentionParams p;
  p.q = reinterpret_cast<const __nv_bfloat16*>(q);
  p.q_token_stride = q_stride;
  p.out = reinterpret_cast<__nv_bfloat16*>(out);
  p.kv.k = reinterpret_cast<__nv_bfloat16*>(const_cast<uint16_t*>(k));
  p.kv.v = reinterpret_cast<__nv_bfloat16*>(const_cast<uint16_t*>(v));
  p.kv.layout = hc.layout;
  p.layer = kLayer;
  p.n_q_heads = c.nq;
  p.tables = {table, hc.stride};
  p.tok_seq = seq;
  p.tok_slot = slot;
  p.n_tokens = n_tokens;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  return p;
}

// out[t][h] = softmax_s(scale q . k_s) v over slots 0..slot[t] of row seq[t].
inline std::vector<double> NaiveAttention(const HostCache& hc, const std::vector<uint16_t>& q, int64_t q_stride, int nq,
                                          const std::vector<int32_t>& seq, const std::vector<int32_t>& slot,
                                          double scale) {
  const int d = hc.layout.head_dim, group = nq / hc.layout.n_kv_heads;
  std::vector<double> out(seq.size() * nq * d, 0.0);
  for (size_t t = 0; t < seq.size(); ++t) {
    for (int h = 0; h < nq; ++h) {
      const int kvh = h / group;
      const int n = slot[t] + 1;
      std::vector<double> s(n);
      double mx = -INFINITY;
      for (int j = 0; j < n; ++j) {
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += Bf16ToFp32(q[t * q_stride + h * d + i]) * hc.K(seq[t], j, kvh, i);
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      double* o = &out[(t * nq + h) * d];
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < d; ++i) o[i] += s[j] / sum * hc.V(seq[t], j, kvh, i);
      }
    }
  }
  return out;
}

}  // namespace beacon::attention_test

#endif  // BEACON_TESTS_CUDA_PAGED_ATTENTION_TEST_UTIL_H_
