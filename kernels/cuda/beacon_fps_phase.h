// The shrink phase of BeaconKV's continual FPS buffers, shared by the CPU
// policy (kv/policy/beacon_policy.cc hands it to ContinualFps) and the device
// observe kernel (beacon_observe.cu), so both shrink on the same tokens.
// No CUDA headers: a constexpr function, which device code may call
// (beacon_kernels_cuda builds with --expt-relaxed-constexpr).
//
// Why phases. Under beacon_filter = all every (layer, query head) buffer of
// a sequence admits every token, so with one common bound U all n_layers *
// n_heads buffers reached U on the same token, and that token paid every
// O(U K d) shrink at once (270 at the default model's 30 x 9: ~17 us
// each, ~2 ms on 2 threads) while the other U - K - 1 tokens paid none: a
// latency spike that an average over steps hides. Buffer i's first shrink comes instead
// at size U - phase_i; after it every buffer keeps the period U - K, so the
// offset persists and buffers with different phases never shrink together.
//
// The spread: phase_i = floor(i * P / N) for buffer i of N (i = layer *
// n_heads + head), P = U - K. Each phase value in [0, P - 1] is taken by
// floor(N / P) or ceil(N / P) buffers, the fewest possible for the busiest
// token (N shrinks over P token residues), and they are consecutive, so a
// token's shrinks fall on as few layers as they can (one or two while
// ceil(N / P) <= n_heads), where BeaconPolicy runs those of a layer on the
// thread pool together (i mod P, equally even, would put them on different
// layers, one at a time). When N < P the phases are distinct and no two
// buffers shrink on the same token.
#ifndef BEACON_KERNELS_CUDA_BEACON_FPS_PHASE_H_
#define BEACON_KERNELS_CUDA_BEACON_FPS_PHASE_H_

#include <cstdint>

namespace beacon {

// floor(index * (bound - keep) / count): in [0, bound - keep - 1].
// REQUIRES 0 <= index < count, 1 <= keep < bound.
constexpr int BeaconFpsPhase(int64_t index, int64_t count, int bound, int keep) {
  return static_cast<int>(index * (bound - keep) / count);
}

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_BEACON_FPS_PHASE_H_
