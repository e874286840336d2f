#include "kv/policy/fps.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

namespace beacon {
namespace {

// Sums with 8 independent accumulators: a serial double sum is bound by the
// add latency (~4 cycles an element); 8 lanes let the compiler use vector
// FMAs.
constexpr int kLanes = 8;
// Points per register block of FarthestPointSample's dot products: 32
// doubles are four AVX-512 (eight AVX2) accumulators.
constexpr int kBlock = 32;

double SquaredNorm(const float* a, int n) {
  double acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(a[i + j]) * a[i + j];
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(a[i]) * a[i];
  double s = 0.0;
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

// The buffers' shared shrink scratch: one per thread, not one per buffer
// (a policy holds n_layers * n_heads buffers), and safe for the concurrent
// ObserveAttention calls of different KV heads, which run on different
// threads.
FpsScratch& ThreadScratch() {
  thread_local FpsScratch scratch;
  return scratch;
}

}  // namespace

void FarthestPointSample(const float* points, const double* inv_norms, int n, int dim, int k, std::vector<int>* chosen,
                         FpsScratch* scratch) {
  chosen->clear();
  k = std::min(k, n);
  if (k <= 0) return;
  // Unit vectors once, in double, in blocks of kBlock points stored
  // dimension-major ([block][dim][kBlock], zero padded): every later step is
  // "dot of every point with one probe vector", computed a block at a time
  // with the block's sums held in registers across the dimension loop over
  // contiguous memory (vector FMAs, no horizontal sums), each dot still
  // summed in dimension order.
  const int n_blocks = (n + kBlock - 1) / kBlock;
  const size_t block_size = static_cast<size_t>(dim) * kBlock;
  std::vector<double>& unit = scratch->unit;
  unit.assign(n_blocks * block_size, 0.0);
  auto at = [&](int i, int c) -> double& {
    return unit[(i / kBlock) * block_size + static_cast<size_t>(c) * kBlock + i % kBlock];
  };
  // Rule 1 needs the mean of the unit vectors: summed alongside, point by
  // point, in `probe`.
  std::vector<double>& probe = scratch->probe;
  probe.assign(dim, 0.0);
  for (int i = 0; i < n; ++i) {
    const float* p = points + static_cast<size_t>(i) * dim;
    for (int c = 0; c < dim; ++c) {
      const double u = p[c] * inv_norms[i];
      at(i, c) = u;
      probe[c] += u;
    }
  }
  std::vector<double>& dots = scratch->dots;
  dots.resize(n_blocks * kBlock);
  auto dot_all = [&] {  // dots[i] = unit_i . probe
    for (int b = 0; b < n_blocks; ++b) {
      const double* block = unit.data() + b * block_size;
      double acc[kBlock] = {};
      for (int c = 0; c < dim; ++c) {
        const double v = probe[c];
        for (int i = 0; i < kBlock; ++i) acc[i] += block[c * kBlock + i] * v;
      }
      std::copy(acc, acc + kBlock, dots.data() + b * kBlock);
    }
  };

  // Rule 1: the least similar to the normalised mean; a zero mean stays
  // zero and makes every point tie, so index 0.
  double mean_norm2 = 0.0;
  for (int c = 0; c < dim; ++c) mean_norm2 += probe[c] * probe[c];
  if (mean_norm2 > 0.0) {
    const double inv = 1.0 / std::sqrt(mean_norm2);
    for (int c = 0; c < dim; ++c) probe[c] *= inv;
  }
  dot_all();
  int next = 0;
  for (int i = 1; i < n; ++i) {
    if (dots[i] < dots[next]) next = i;  // strict: ties keep the lowest index
  }

  // Rule 2, with min_dist[i] (distance of point i to the chosen set) updated
  // by each new point only: O(n * dim) per pick.
  std::vector<double>& min_dist = scratch->min_dist;
  std::vector<char>& taken = scratch->chosen;
  min_dist.assign(n, std::numeric_limits<double>::infinity());
  taken.assign(n, 0);
  for (;;) {
    chosen->push_back(next);
    taken[next] = 1;
    if (static_cast<int>(chosen->size()) == k) break;
    for (int c = 0; c < dim; ++c) probe[c] = at(next, c);
    dot_all();
    int best = -1;
    double best_dist = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < n; ++i) {
      if (taken[i]) continue;
      min_dist[i] = std::min(min_dist[i], 1.0 - dots[i]);
      if (min_dist[i] > best_dist) {  // strict: ties keep the lowest index
        best_dist = min_dist[i];
        best = i;
      }
    }
    next = best;
  }
}

ContinualFps::ContinualFps(int dim, int bound, int keep, int phase)
    : dim_(dim), bound_(bound), keep_(keep), phase_(phase) {
  assert(dim >= 1 && keep >= 1 && keep < bound && phase >= 0 && phase < bound - keep);
}

bool ContinualFps::Add(const float* q, int64_t tag) {
  const double norm2 = SquaredNorm(q, dim_);
  if (!(norm2 > 0.0) || !std::isfinite(norm2)) return false;
  if (points_.empty()) {  // lazily: most buffers of a short sequence stay small
    points_.resize(static_cast<size_t>(bound_) * dim_);
    inv_norms_.resize(bound_);
    tags_.resize(bound_);
  }
  std::memcpy(points_.data() + static_cast<size_t>(size_) * dim_, q, sizeof(float) * dim_);
  inv_norms_[size_] = 1.0 / std::sqrt(norm2);
  tags_[size_] = tag;
  if (++size_ == shrink_size()) Shrink();
  return true;
}

void ContinualFps::Shrink() {
  FarthestPointSample(points_.data(), inv_norms_.data(), size_, dim_, keep_, &chosen_, &ThreadScratch());
  // Survivors move to the front in arrival order. Ascending indices make
  // the in-place move safe: chosen_[j] >= j, so no survivor is overwritten
  // before it has moved.
  std::sort(chosen_.begin(), chosen_.end());
  for (int j = 0; j < static_cast<int>(chosen_.size()); ++j) {
    const int from = chosen_[j];
    if (from == j) continue;
    std::memcpy(points_.data() + static_cast<size_t>(j) * dim_, points_.data() + static_cast<size_t>(from) * dim_,
                sizeof(float) * dim_);
    inv_norms_[j] = inv_norms_[from];
    tags_[j] = tags_[from];
  }
  size_ = static_cast<int>(chosen_.size());
  ++shrinks_;
}

void ContinualFps::Beacons(std::vector<int>* indices) const {
  if (size_ > keep_) {
    FarthestPointSample(points_.data(), inv_norms_.data(), size_, dim_, keep_, indices, &ThreadScratch());
    return;
  }
  indices->resize(size_);
  for (int i = 0; i < size_; ++i) (*indices)[i] = i;
}

}  // namespace beacon
