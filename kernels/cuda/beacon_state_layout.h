// The size and layout of one sequence's BeaconKV state in device memory
// (beacon_state.h has what each region holds), and of the scratch one
// eviction needs on the device, without CUDA headers: the capacity planner
// counts both (planner/cost_model.h) in builds without CUDA, and the CUDA
// backend reserves both at start-up (engine/cuda/cuda_backend.h).
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

// The logit kernels' grouping of slots (beacon_logits.h): blocks of
// kChunkSlots slots, at most kMaxGroups partial-softmax groups per query, so
// the partials do not grow with the context, and at least
// kMinChunksPerGroup chunks a group (while there are that many), so that a
// statistics block, which stages its query tile once, reads at least 4x
// the query tile's bytes in keys (2,176 slots: 9 groups of 8 chunks, not
// 34 of 2). constexpr functions: device
// code calls them too (beacon_kernels_cuda builds with
// --expt-relaxed-constexpr).
namespace beacon_logits {

inline constexpr int kChunkSlots = 32;  // slots per block of the logit kernels (one per lane)
inline constexpr int kMaxGroups = 64;   // partial softmax stats per query: at most this many
inline constexpr int kMinChunksPerGroup = 8;

constexpr size_t NumChunks(int32_t n_slots) { return (static_cast<size_t>(n_slots) + kChunkSlots - 1) / kChunkSlots; }
// 0 when there are no slots.
constexpr size_t ChunksPerGroup(int32_t n_slots) {
  const size_t spread = (NumChunks(n_slots) + kMaxGroups - 1) / kMaxGroups;
  return NumChunks(n_slots) == 0 ? 0 : spread > kMinChunksPerGroup ? spread : kMinChunksPerGroup;
}
constexpr size_t NumGroups(int32_t n_slots) {
  return ChunksPerGroup(n_slots) == 0 ? 0
                                      : (NumChunks(n_slots) + ChunksPerGroup(n_slots) - 1) / ChunksPerGroup(n_slots);
}

}  // namespace beacon_logits

// Byte offsets of LaunchBeaconScore's workspace (beacon_state.h) for
// `n_slots` slots: the rotated scoring queries, their counts and positions,
// the partial and final softmax stats, and the unpooled scores.
struct BeaconScoreWorkspaceLayout {
  static BeaconScoreWorkspaceLayout For(const BeaconDims& d, int32_t n_slots) {
    auto align = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t lh = static_cast<size_t>(d.n_layers) * d.n_heads;
    const size_t q_max = static_cast<size_t>(d.recent) + d.beacons;
    const size_t groups = beacon_logits::NumGroups(n_slots);
    BeaconScoreWorkspaceLayout w;
    size_t at = 0;
    w.queries = at, at += align(lh * q_max * d.head_dim * sizeof(float));
    w.n_queries = at, at += align(lh * sizeof(int32_t));
    w.query_pos = at, at += align(lh * q_max * sizeof(int32_t));
    w.partials = at, at += align(lh * q_max * groups * 2 * sizeof(float));  // float2
    w.stats = at, at += align(lh * q_max * 2 * sizeof(float));              // float2
    w.raw = at, at += align(static_cast<size_t>(d.n_layers) * d.n_kv_heads * n_slots * sizeof(float));
    w.total = at;
    return w;
  }
  size_t queries = 0, n_queries = 0, query_pos = 0, partials = 0, stats = 0, raw = 0, total = 0;
};

// Byte offsets of the scratch of one eviction on the device
// (engine/cuda/device_kv.cc) of a sequence holding `n_slots` slots in
// blocks of `block_size`: its block table, the scores, the kept slot lists
// (sized for n_keep = n_slots, the most an eviction keeps), and the score
// and selection workspaces (kv_select.h's SelectKeepWorkspaceBytes:
// one uint32 per (layer, KV head, slot)). Every size grows with n_slots, so
// the backend reserves it once for the most slots a sequence can hold.
struct BeaconEvictScratchLayout {
  static BeaconEvictScratchLayout For(const BeaconDims& d, int32_t n_slots, int32_t block_size) {
    auto align = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t per_slot = static_cast<size_t>(d.n_layers) * d.n_kv_heads * n_slots;
    const size_t blocks = block_size > 0 ? (static_cast<size_t>(n_slots) + block_size - 1) / block_size : 0;
    BeaconEvictScratchLayout l;
    size_t at = 0;
    l.table = at, at += align(blocks * sizeof(int32_t));
    l.scores = at, at += align(per_slot * sizeof(float));
    l.keep = at, at += align(per_slot * sizeof(int32_t));
    l.score_workspace = at, at += align(BeaconScoreWorkspaceLayout::For(d, n_slots).total);
    l.select_workspace = at, at += align(per_slot * sizeof(uint32_t));
    l.total_bytes = at;
    return l;
  }
  // What a reservation for every n_slots <= max_slots needs: every region
  // but the partial softmax stats grows with n_slots, and those have
  // NumGroups(n) <= min(kMaxGroups, ceil(NumChunks(max_slots) /
  // kMinChunksPerGroup)) groups (NumGroups itself is not monotonic: 512
  // chunks make 64 groups, 513 make 57).
  static size_t BytesForAtMost(const BeaconDims& d, int32_t max_slots, int32_t block_size) {
    auto align = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t chunks = beacon_logits::NumChunks(max_slots);
    const size_t spread = (chunks + beacon_logits::kMinChunksPerGroup - 1) / beacon_logits::kMinChunksPerGroup;
    const size_t most_groups = spread < beacon_logits::kMaxGroups ? spread : beacon_logits::kMaxGroups;
    const size_t extra_groups = most_groups - beacon_logits::NumGroups(max_slots);
    const size_t lhq = static_cast<size_t>(d.n_layers) * d.n_heads * (static_cast<size_t>(d.recent) + d.beacons);
    return For(d, max_slots, block_size).total_bytes + align(lhq * extra_groups * 2 * sizeof(float));
  }
  size_t table = 0, scores = 0, keep = 0, score_workspace = 0, select_workspace = 0, total_bytes = 0;
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_BEACON_STATE_LAYOUT_H_
