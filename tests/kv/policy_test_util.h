// Test helpers for the KV policy tests: a small model, a KvCache holding one
// sequence with random post-RoPE keys at chosen positions, and naive
// references (RoPE, softmax, max-pool, the selection rule) written with plain
// loops in double precision, independently of the library's code.
#ifndef BEACON_TESTS_KV_POLICY_TEST_UTIL_H_
#define BEACON_TESTS_KV_POLICY_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "kv/store/kv_cache.h"

namespace beacon::kvtest {

// 2 layers, 4 query heads in 2 GQA groups of 2, head_dim 8.
inline PolicyModelInfo SmallModel(bool interleaved = false) {
  PolicyModelInfo m;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 8;
  m.rope_theta = 10000.0f;
  m.rope_interleaved = interleaved;
  return m;
}

// n ascending positions starting at 0 with random gaps of 1..max_gap: a
// sequence's positions after earlier evictions ("shuffled but ascending").
inline std::vector<int32_t> AscendingPositions(int32_t n, int max_gap, std::mt19937& rng) {
  std::vector<int32_t> p(n);
  int32_t at = 0;
  for (int32_t i = 0; i < n; ++i) {
    p[i] = at;
    at += 1 + static_cast<int32_t>(rng() % max_gap);
  }
  return p;
}

inline std::vector<float> RandomVector(size_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// One sequence in its own KvCache. Slot s of every (layer, KV head) gets the
// position positions[s] and random K and V (independent per layer and head).
class TestSequence {
 public:
  TestSequence(const PolicyModelInfo& m, int block_size, int32_t num_blocks)
      : cache_(std::make_unique<KvCache>(KvCacheShape{m.n_layers, m.n_kv_heads, m.head_dim, block_size}, num_blocks)),
        kv_(std::make_unique<SequenceKv>(cache_.get())) {}

  // Appends slots at `positions`; REQUIRES enough free blocks.
  void Append(std::span<const int32_t> positions, std::mt19937& rng, float key_stddev = 1.0f) {
    const KvCacheShape& sh = cache_->shape();
    const int32_t first = kv_->num_slots();
    const int32_t n = first + static_cast<int32_t>(positions.size());
    ASSERT_TRUE(kv_->Reserve(n).ok());
    std::normal_distribution<float> dist(0.0f, key_stddev);
    for (int l = 0; l < sh.n_layers; ++l) {
      for (int h = 0; h < sh.n_kv_heads; ++h) {
        for (int32_t s = first; s < n; ++s) {
          const int32_t b = kv_->block_ids()[s / sh.block_size];
          const int off = s % sh.block_size;
          for (int c = 0; c < sh.head_dim; ++c) {
            cache_->K(l, b, h)[off * sh.head_dim + c] = dist(rng);
            cache_->V(l, b, h)[off * sh.head_dim + c] = dist(rng);
          }
          cache_->Positions(l, b, h)[off] = positions[s - first];
        }
      }
    }
    kv_->CommitSlots(n);
  }

  // Slot data of (layer, KV head), for tests that plant structure in keys.
  float* MutableKey(int layer, int head, int32_t slot) {
    const int bs = cache_->shape().block_size;
    return cache_->K(layer, kv_->block_ids()[slot / bs], head) + (slot % bs) * cache_->shape().head_dim;
  }

  KvCache& cache() { return *cache_; }
  SequenceKv& kv() { return *kv_; }
  KeysView keys(int layer) const { return KeysView(cache_.get(), kv_.get(), layer); }

  // Copies of slot data, for references computed before an eviction moves it.
  std::vector<float> Key(int layer, int head, int32_t slot) const {
    const float* k = keys(layer).key(head, slot);
    return std::vector<float>(k, k + cache_->shape().head_dim);
  }
  std::vector<int32_t> Positions(int layer, int head) const {
    std::vector<int32_t> p(kv_->num_slots());
    for (int32_t s = 0; s < kv_->num_slots(); ++s) p[s] = keys(layer).position(head, s);
    return p;
  }

 private:
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<SequenceKv> kv_;
};

// ---- Naive references ---------------------------------------------------------

// RoPE of one head vector: pairs (i, i + d/2) (NeoX/Llama-HF style) or
// (2i, 2i + 1) (interleaved, GPT-J style), angle = position * theta^(-2i/d)
// with the frequency rounded to f32, as models (and HF's inv_freq) have it.
inline std::vector<double> NaiveRope(const float* x, int d, int32_t position, double theta, bool interleaved) {
  std::vector<double> out(x, x + d);
  for (int i = 0; i < d / 2; ++i) {
    const double freq = static_cast<float>(std::pow(theta, -2.0 * i / d));
    const double angle = position * freq;
    const int a = interleaved ? 2 * i : i;
    const int b = interleaved ? 2 * i + 1 : i + d / 2;
    out[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
    out[b] = x[a] * std::sin(angle) + x[b] * std::cos(angle);
  }
  return out;
}

inline double NaiveDot(const std::vector<double>& a, const float* b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Softmax over the entries with mask[i] true; masked entries get 0.
inline std::vector<double> NaiveSoftmax(const std::vector<double>& x, const std::vector<bool>& mask) {
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < x.size(); ++i) {
    if (mask[i]) mx = std::max(mx, x[i]);
  }
  std::vector<double> p(x.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (mask[i]) total += p[i] = std::exp(x[i] - mx);
  }
  for (double& v : p) v /= total;
  return p;
}

inline std::vector<double> NaiveSoftmax(const std::vector<double>& x) {
  return NaiveSoftmax(x, std::vector<bool>(x.size(), true));
}

// out[s] = max of x over [s - k/2, s + k/2] within [0, n).
inline std::vector<double> NaiveMaxPool(const std::vector<double>& x, int kernel) {
  const int n = static_cast<int>(x.size());
  std::vector<double> out(n);
  for (int s = 0; s < n; ++s) {
    double m = -std::numeric_limits<double>::infinity();
    for (int t = s - kernel / 2; t <= s + kernel / 2; ++t) {
      if (t >= 0 && t < n) m = std::max(m, x[t]);
    }
    out[s] = m;
  }
  return out;
}

struct NaiveProtection {
  int32_t prompt_len = 0;
  bool keep_prompt = true;
  int32_t sinks = 4;
  int32_t window = 32;
};

// The selection rule by a full sort: protected slots (prompt, sinks by
// position; the last `window` slots), then the best scores, ties to the later
// slot; if too many are protected, the earliest protected. Ascending slots.
inline std::vector<int32_t> NaiveKeep(const std::vector<double>& scores, const std::vector<int32_t>& positions,
                                      const NaiveProtection& p, int32_t n_keep) {
  const int32_t n = static_cast<int32_t>(scores.size());
  std::vector<int32_t> prot, rest;
  for (int32_t s = 0; s < n; ++s) {
    const bool is_prot = (p.keep_prompt && positions[s] < p.prompt_len) || positions[s] < p.sinks || s >= n - p.window;
    (is_prot ? prot : rest).push_back(s);
  }
  if (static_cast<int32_t>(prot.size()) >= n_keep) return std::vector<int32_t>(prot.begin(), prot.begin() + n_keep);
  std::sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return a > b;
  });
  std::vector<int32_t> keep = prot;
  keep.insert(keep.end(), rest.begin(), rest.begin() + (n_keep - static_cast<int32_t>(prot.size())));
  std::sort(keep.begin(), keep.end());
  return keep;
}

inline std::vector<int32_t> Gather(const std::vector<int32_t>& values, const std::vector<int32_t>& index) {
  std::vector<int32_t> out;
  out.reserve(index.size());
  for (int32_t i : index) out.push_back(values[i]);
  return out;
}

}  // namespace beacon::kvtest

#endif  // BEACON_TESTS_KV_POLICY_TEST_UTIL_H_
