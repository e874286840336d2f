// Farthest-point sampling (FPS) under cosine distance, and the continual FPS
// buffer that keeps BeaconKV's beacon queries: representatives of the
// *directions* of a query head's whole history, in bounded memory.
//
// Distance: d(a, b) = 1 - cos(a, b). Points are queries of any norm; FPS
// sees only their directions. Zero (or non-finite) vectors have no direction
// and are refused by ContinualFps::Add.
//
// The selection rule (both functions below follow it exactly):
//   1. first point: the one farthest from the mean of the normalised points,
//      i.e. the lowest cosine similarity to that mean (ties: lowest index);
//      when the mean is the zero vector every point ties, so index 0;
//   2. then repeatedly the point whose minimum distance to the chosen set is
//      largest (ties: lowest index), until k points are chosen.
// Cost: O(n * k * dim) with the minimum distances kept incrementally (each
// new point updates every candidate once) instead of O(n * k^2 * dim).
//
// Thread ownership: a ContinualFps belongs to one (sequence, layer, query
// head); one thread at a time.
#ifndef BEACON_KV_POLICY_FPS_H_
#define BEACON_KV_POLICY_FPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace beacon {

// Reusable buffers of FarthestPointSample, so that repeated calls allocate
// nothing in steady state. ContinualFps uses one per thread.
struct FpsScratch {
  std::vector<double> unit;   // normalised points, blocked (see fps.cc)
  std::vector<double> dots;   // [n rounded up]
  std::vector<double> probe;  // [dim]
  std::vector<double> min_dist;
  std::vector<char> chosen;
};

// Chooses min(k, n) of the n points (rows of `points`, [n][dim]) by the rule
// above; `chosen` receives their indices in selection order. inv_norms[i] is
// 1 / |points[i]| (> 0, finite), so callers that keep norms pay no sqrt here.
// Normalises and accumulates in double, so the choice is reproducible by
// any careful implementation of the rule on data without near-ties.
void FarthestPointSample(const float* points, const double* inv_norms, int n, int dim, int k, std::vector<int>* chosen,
                         FpsScratch* scratch);

// Continual FPS: a buffer that grows by Add until it holds `bound` (U)
// points, at which moment FPS shrinks it to `keep` (K) points, and it refills.
// Its size after any Add is therefore in [0, U - 1]. A `phase` moves the
// first shrink earlier, to size U - phase; every later one comes at U, so
// buffers with different phases that admit in lockstep never shrink on the
// same Add (BeaconKV staggers its buffers so: kernels/cuda/beacon_fps_phase.h).
//
// Storage: each point is kept as the original (un-normalised) vector plus
// its inverse norm. The cosine geometry is that of the normalised queries,
// but the original survives for scoring, where a query's norm is its softmax
// temperature (see beacon_policy.cc); keeping the norm instead of a second,
// normalised copy halves the memory, which matters at n_layers * n_heads
// buffers per sequence.
//
// Order: survivors of a shrink stay in insertion (chronological) order, and
// new points append, so index order is always arrival order.
class ContinualFps {
 public:
  // REQUIRES dim >= 1, 1 <= keep < bound, 0 <= phase < bound - keep.
  ContinualFps(int dim, int bound, int keep, int phase = 0);

  // Appends q (dim floats) with a caller's tag (the token position in the
  // policy); shrinks to `keep` points if the buffer thereby reaches
  // shrink_size().
  // Returns false, storing nothing, when q has zero or non-finite norm.
  bool Add(const float* q, int64_t tag);

  // The beacons: indices (selection order) of FPS(buffer, keep) when the
  // buffer holds more than `keep` points, otherwise every index in order.
  // Does not modify the buffer: between shrinks the beacons follow the
  // whole buffer, old survivors and new arrivals alike.
  void Beacons(std::vector<int>* indices) const;

  int size() const { return size_; }
  int dim() const { return dim_; }
  int bound() const { return bound_; }
  int keep() const { return keep_; }
  int phase() const { return phase_; }
  // The size whose Add shrinks the buffer next: bound - phase until the
  // first shrink, bound after it.
  int shrink_size() const { return shrinks_ == 0 ? bound_ - phase_ : bound_; }
  // Original vector and tag of point i < size().
  const float* point(int i) const { return points_.data() + static_cast<size_t>(i) * dim_; }
  int64_t tag(int i) const { return tags_[i]; }
  // Shrinks so far (one per shrink_size() reached).
  int64_t shrinks() const { return shrinks_; }

 private:
  void Shrink();

  int dim_;
  int bound_;
  int keep_;
  int phase_;
  int size_ = 0;
  int64_t shrinks_ = 0;
  std::vector<float> points_;      // [bound][dim], allocated on first Add
  std::vector<double> inv_norms_;  // [bound]
  std::vector<int64_t> tags_;      // [bound]
  std::vector<int> chosen_;
};

}  // namespace beacon

#endif  // BEACON_KV_POLICY_FPS_H_
