// The size and layout of one sequence's BeaconKV state in device memory
// (beacon_state.h has what each region holds), without CUDA headers: the
// capacity planner counts it (planner/cost_model.h) in builds without CUDA.
#ifndef BEACON_KERNELS_CUDA_BEACON_STATE_LAYOUT_H_
#define BEACON_KERNELS_CUDA_BEACON_STATE_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace beacon {

struct BeaconDims {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // divides n_heads (GQA group = n_heads / n_kv_heads)
  int head_dim = 0;    // even, in [2, 256]
  int recent = 0;      // R: recent queries, [1, 1024]
  int beacons = 0;     // K: beacons per query head, >= 1
  int fps_bound = 0;   // U: FPS buffer size that triggers a shrink, K < U <= 4096
};

// The limits above (those of KvPolicyOptions::Validate plus the kernels').
inline bool BeaconDimsValid(const BeaconDims& d) {
  return d.n_layers >= 1 && d.n_heads >= 1 && d.n_kv_heads >= 1 && d.n_heads % d.n_kv_heads == 0 && d.head_dim >= 2 &&
         d.head_dim <= 256 && d.head_dim % 2 == 0 && d.recent >= 1 && d.recent <= 1024 && d.beacons >= 1 &&
         d.fps_bound > d.beacons && d.fps_bound <= 4096;
}

// Byte offsets of the regions of one sequence's state allocation.
struct BeaconStateLayout {
  static BeaconStateLayout For(const BeaconDims& d) {
    auto align = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t L = d.n_layers, H = d.n_heads, D = d.head_dim, R = d.recent, U = d.fps_bound;
    BeaconStateLayout l;
    size_t at = 0;
    l.ring = at, at += align(L * R * H * D * sizeof(uint16_t));  // bf16 (beacon_state.h)
    l.ring_pos = at, at += align(L * R * sizeof(int32_t));
    l.fps_pts = at, at += align(L * H * U * D * sizeof(uint16_t));  // bf16
    l.fps_inv = at, at += align(L * H * U * sizeof(double));
    l.fps_tag = at, at += align(L * H * U * sizeof(int32_t));
    l.fps_size = at, at += align(L * H * sizeof(int32_t));
    l.total_bytes = at;
    return l;
  }
  size_t total_bytes = 0;
  size_t ring = 0, ring_pos = 0, fps_pts = 0, fps_inv = 0, fps_tag = 0, fps_size = 0;
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_BEACON_STATE_LAYOUT_H_
