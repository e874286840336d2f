// Independent references for the FPS and BeaconKV tests: plain double loops
// that share no code with kv/ (own cosine, mean, argmax, RoPE, softmax,
// selection), plus a small random KV cache. Header-only, test use only.
#ifndef BEACON_TESTS_KV_BEACON_TEST_UTIL_H_
#define BEACON_TESTS_KV_BEACON_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kv/store/kv_cache.h"

namespace beacon::beacon_test {

using Vec = std::vector<double>;

inline Vec ToVec(const float* x, int n) { return Vec(x, x + n); }

inline double RefDot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline Vec RefUnit(const Vec& a) {
  const double n = std::sqrt(RefDot(a, a));
  Vec u(a.size());
  for (size_t i = 0; i < a.size(); ++i) u[i] = a[i] / n;
  return u;
}

// Naive farthest-point sampling under 1 - cos: first the point least similar
// to the normalised mean of the unit vectors, then the point maximising its
// minimum distance to the chosen set, recomputed from scratch each round.
// Ties to the lowest index.
inline std::vector<int> RefFps(const std::vector<Vec>& points, int k) {
  const int n = static_cast<int>(points.size());
  std::vector<Vec> unit;
  for (const Vec& p : points) unit.push_back(RefUnit(p));
  std::vector<int> chosen;
  if (n == 0) return chosen;
  Vec mean(unit[0].size(), 0.0);
  for (const Vec& u : unit) {
    for (size_t c = 0; c < u.size(); ++c) mean[c] += u[c] / n;
  }
  if (RefDot(mean, mean) > 0.0) mean = RefUnit(mean);
  int first = 0;
  for (int i = 1; i < n; ++i) {
    if (RefDot(unit[i], mean) < RefDot(unit[first], mean)) first = i;
  }
  chosen.push_back(first);
  while (static_cast<int>(chosen.size()) < std::min(k, n)) {
    int best = -1;
    double best_d = -1e300;
    for (int i = 0; i < n; ++i) {
      if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
      double md = 1e300;
      for (int c : chosen) md = std::min(md, 1.0 - RefDot(unit[i], unit[c]));
      if (md > best_d) {
        best_d = md;
        best = i;
      }
    }
    chosen.push_back(best);
  }
  return chosen;
}

// The continual buffer, naively: append; at `bound` points (`bound - phase`
// before the first shrink) keep the RefFps choice of `keep` in arrival order.
struct RefContinual {
  RefContinual(int bound_, int keep_, int phase_ = 0) : bound(bound_), keep(keep_), phase(phase_) {}
  int bound, keep, phase;
  std::vector<Vec> points;
  std::vector<int64_t> tags;
  int shrinks = 0;

  void Add(const Vec& q, int64_t tag) {
    points.push_back(q);
    tags.push_back(tag);
    if (static_cast<int>(points.size()) < (shrinks == 0 ? bound - phase : bound)) return;
    std::vector<int> c = RefFps(points, keep);
    std::sort(c.begin(), c.end());
    std::vector<Vec> p2;
    std::vector<int64_t> t2;
    for (int i : c) {
      p2.push_back(points[i]);
      t2.push_back(tags[i]);
    }
    points = p2;
    tags = t2;
    ++shrinks;
  }
  // The beacon vectors: FPS down to `keep` if more, else all.
  std::vector<Vec> Beacons() const {
    if (static_cast<int>(points.size()) <= keep) return points;
    std::vector<Vec> out;
    for (int i : RefFps(points, keep)) out.push_back(points[i]);
    return out;
  }
};

// BeaconKV's documented shrink phase of buffer i of n (i = layer * n_heads +
// head): floor(i * (bound - keep) / n), written out independently of
// kernels/cuda/beacon_fps_phase.h.
inline int RefPhase(int i, int n, int bound, int keep) {
  const long long p = static_cast<long long>(i) * (bound - keep);
  return static_cast<int>((p - p % n) / n);
}

// RoPE of one head vector, both pair layouts, in double.
inline Vec RefRope(const Vec& x, int64_t position, double theta, bool interleaved) {
  const int d = static_cast<int>(x.size());
  Vec y = x;
  for (int i = 0; i < d / 2; ++i) {
    const double angle = position * std::pow(theta, -2.0 * i / d);
    const int a = interleaved ? 2 * i : i;
    const int b = interleaved ? 2 * i + 1 : i + d / 2;
    y[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
    y[b] = x[a] * std::sin(angle) + x[b] * std::cos(angle);
  }
  return y;
}

// softmax(q . k_s / sqrt(d)) over the keys.
inline Vec RefAttention(const Vec& q, const std::vector<Vec>& keys) {
  Vec logits;
  double mx = -1e300;
  for (const Vec& k : keys) {
    logits.push_back(RefDot(q, k) / std::sqrt(static_cast<double>(q.size())));
    mx = std::max(mx, logits.back());
  }
  double sum = 0.0;
  for (double& l : logits) sum += (l = std::exp(l - mx));
  for (double& l : logits) l /= sum;
  return logits;
}

// RefAttention under the causal mask of a query at `qpos`: keys at
// positions > qpos get probability 0 (all zeros when none is visible).
inline Vec RefCausalAttention(const Vec& q, const std::vector<Vec>& keys, const std::vector<int32_t>& key_pos,
                              int32_t qpos) {
  std::vector<Vec> visible;
  for (size_t s = 0; s < keys.size(); ++s) {
    if (key_pos[s] <= qpos) visible.push_back(keys[s]);
  }
  Vec out(keys.size(), 0.0);
  if (visible.empty()) return out;
  const Vec p = RefAttention(q, visible);
  for (size_t s = 0, v = 0; s < keys.size(); ++s) {
    if (key_pos[s] <= qpos) out[s] = p[v++];
  }
  return out;
}

inline Vec RefMaxPool(const Vec& x, int kernel) {
  const int n = static_cast<int>(x.size()), half = kernel / 2;
  Vec y(n);
  for (int s = 0; s < n; ++s) {
    y[s] = x[s];
    for (int t = std::max(0, s - half); t <= std::min(n - 1, s + half); ++t) y[s] = std::max(y[s], x[t]);
  }
  return y;
}

// Protected slots (prompt when keep_prompt, positions < sinks, the last
// `window` slots), then the best scores, ties to the later slot; ascending.
inline std::vector<int32_t> RefSelect(const Vec& scores, const std::vector<int32_t>& positions, int32_t prompt_len,
                                      bool keep_prompt, int32_t sinks, int32_t window, int32_t n_keep) {
  const int32_t n = static_cast<int32_t>(scores.size());
  std::vector<int32_t> keep, rest;
  for (int32_t s = 0; s < n; ++s) {
    const bool prot = (keep_prompt && positions[s] < prompt_len) || positions[s] < sinks || s >= n - window;
    (prot ? keep : rest).push_back(s);
  }
  std::sort(rest.begin(), rest.end(),
            [&](int32_t a, int32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a > b; });
  for (int32_t i = 0; static_cast<int32_t>(keep.size()) < n_keep; ++i) keep.push_back(rest[i]);
  std::sort(keep.begin(), keep.end());
  return keep;
}

// One sequence in a KvCache whose slot s of every (layer, KV head) holds
// keys[layer][kv_head][s] and position positions[s]. Keys are written as
// given (tests that want post-RoPE keys rotate them first).
struct TestCache {
  KvCache cache;
  SequenceKv seq;

  TestCache(const KvCacheShape& shape, const std::vector<std::vector<std::vector<Vec>>>& keys,
            const std::vector<int32_t>& positions)
      : cache(shape, static_cast<int32_t>(positions.size() / shape.block_size + 2)), seq(&cache) {
    const int32_t n = static_cast<int32_t>(positions.size());
    if (!seq.Reserve(n).ok()) std::abort();
    seq.CommitSlots(n);
    const int bs = shape.block_size;
    for (int l = 0; l < shape.n_layers; ++l) {
      for (int h = 0; h < shape.n_kv_heads; ++h) {
        for (int32_t s = 0; s < n; ++s) {
          const int32_t block = seq.block_ids()[s / bs];
          float* k = cache.K(l, block, h) + (s % bs) * shape.head_dim;
          for (int c = 0; c < shape.head_dim; ++c) k[c] = static_cast<float>(keys[l][h][s][c]);
          cache.Positions(l, block, h)[s % bs] = positions[s];
        }
      }
    }
  }
};

// A vector of n N(0, scale^2) floats, exactly representable as float so that
// the float code under test and the double references see the same inputs.
inline Vec RandomVec(std::mt19937& rng, int n, double scale) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Vec v(n);
  for (double& x : v) x = static_cast<float>(scale * dist(rng));
  return v;
}

inline std::vector<float> ToFloats(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

// What BeaconPolicy's ring and FPS buffers hold of query `v`: with
// beacon_bf16_state, each element as a float rounded to bf16 (Fp32ToBf16,
// round to nearest even), else the float.
inline Vec StateRounded(const Vec& v, bool bf16_state) {
  Vec out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    out[i] = bf16_state ? Bf16ToFp32(Fp32ToBf16(f)) : f;
  }
  return out;
}

// v with every element rounded to float: what a float store holds.
inline Vec RoundToFloat(const Vec& v) {
  Vec r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<float>(v[i]);
  return r;
}

}  // namespace beacon::beacon_test

#endif  // BEACON_TESTS_KV_BEACON_TEST_UTIL_H_
