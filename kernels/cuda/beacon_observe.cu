// LaunchBeaconObserve (kernels/cuda/beacon_state.h): the device twin of
// BeaconPolicy::ObserveQuery under beacon_filter = kAll, i.e. per layer
// RecentQueryRing::Push of every token and ContinualFps::Add of every query
// head's vector (of the tokens at positions >= the entry's
// fps_from_position: beacon_prompt_queries off skips the prompt's).
//
// One block per (query head h, entry). The block owns the FPS buffer of
// (layer, h) of its entry's state and its head's columns of the ring, so
// blocks never share a word they write (ring_pos is written by the h == 0
// blocks only). It walks its tokens in order in windows that end where the
// buffer reaches its shrink size (U - phase before its first shrink, U
// after: the phase of buffer layer * n_heads + h, beacon_fps_phase.h),
// shrinking there and then as ContinualFps does, so the buffer after the
// launch is the CPU's after the same sequence of Adds. Whether the buffer
// has shrunk before is read from the state: fps_inv[U - 1] is nonzero
// exactly then (beacon_state.h), so no state is added for the phase.
// Cost per block: a few barriers per window of up to U - K tokens, plus one
// BlockFps per shrink (K picks, each a head_dim-long double FMA chain).
#include <cmath>

#include "kernels/cuda/beacon_fps.cuh"
#include "kernels/cuda/beacon_fps_phase.h"
#include "kernels/cuda/beacon_state.h"

namespace beacon {
namespace {

using beacon_fps::kThreads;

struct StateView {
  uint16_t* ring;     // this layer: [R][n_heads][d], bf16
  int32_t* ring_pos;  // this layer: [R]
  uint16_t* pts;      // (layer, h): [U][d], bf16
  double* inv;        // (layer, h): [U]
  int32_t* tag;       // (layer, h): [U]
  int32_t* size;      // (layer, h)
};

__device__ StateView View(void* state, const BeaconDims& dims, const BeaconStateLayout& lay, int layer, int h) {
  char* base = static_cast<char*>(state);
  const size_t d = dims.head_dim, R = dims.recent, H = dims.n_heads, U = dims.fps_bound;
  const size_t lh = static_cast<size_t>(layer) * H + h;
  StateView v;
  v.ring = reinterpret_cast<uint16_t*>(base + lay.ring) + static_cast<size_t>(layer) * R * H * d;
  v.ring_pos = reinterpret_cast<int32_t*>(base + lay.ring_pos) + static_cast<size_t>(layer) * R;
  v.pts = reinterpret_cast<uint16_t*>(base + lay.fps_pts) + lh * U * d;
  v.inv = reinterpret_cast<double*>(base + lay.fps_inv) + lh * U;
  v.tag = reinterpret_cast<int32_t*>(base + lay.fps_tag) + lh * U;
  v.size = reinterpret_cast<int32_t*>(base + lay.fps_size) + lh;
  return v;
}

// After BlockFps: moves the chosen points (min_dist == -inf) to the front in
// ascending index order, as ContinualFps::Shrink does after sorting. Each
// column (and the inv/tag arrays) is moved by one thread in ascending order;
// destination j <= source i, so a sequential move per column never
// overwrites a source it still has to read, and columns are independent.
__device__ void CompactSurvivors(const StateView& v, int n, int dim, const double* min_dist) {
  for (int c = threadIdx.x; c < dim; c += kThreads) {
    int j = 0;
    for (int i = 0; i < n; ++i) {
      if (min_dist[i] != -CUDART_INF) continue;
      if (i != j) v.pts[static_cast<size_t>(j) * dim + c] = v.pts[static_cast<size_t>(i) * dim + c];
      ++j;
    }
  }
  if (threadIdx.x == 0) {
    int j = 0;
    for (int i = 0; i < n; ++i) {
      if (min_dist[i] != -CUDART_INF) continue;
      v.inv[j] = v.inv[i];
      v.tag[j] = v.tag[i];
      ++j;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    BeaconObserveKernel(BeaconDims dims, BeaconStateLayout lay, int first_layer, const BeaconObserveEntry* entries,
                        const float* __restrict__ q_layers, int64_t q_layer_stride,
                        const int32_t* __restrict__ tok_pos) {
  extern __shared__ double smem[];
  const beacon_fps::Smem fs = beacon_fps::CarveSmem(smem, dims.fps_bound, dims.head_dim);
  __shared__ double win_inv[kThreads];  // 1 / |q| of the window's tokens
  __shared__ int win_dst[kThreads];     // their buffer index, -1 when refused
  __shared__ int new_size;
  const int h = blockIdx.x;
  const int layer = first_layer + static_cast<int>(blockIdx.z);
  const float* q_pre_rope = q_layers + static_cast<int64_t>(blockIdx.z) * q_layer_stride;
  const BeaconObserveEntry e = entries[blockIdx.y];
  if (e.state == nullptr || e.n_tokens <= 0) return;
  const int d = dims.head_dim, R = dims.recent, U = dims.fps_bound, K = dims.beacons;
  const int n = e.n_tokens, tid = threadIdx.x;
  const StateView v = View(e.state, dims, lay, layer, h);
  const size_t row = static_cast<size_t>(dims.n_heads) * d;
  auto query = [&](int i) {
    return q_pre_rope + (static_cast<int64_t>(e.first_token) + i) * row + static_cast<size_t>(h) * d;
  };
  auto ring_slot = [&](int i) { return static_cast<int>((static_cast<int64_t>(e.ring_count_before) + i) % R); };

  // Ring: only the last R tokens of the launch survive in it; they land in
  // distinct slots, so they are written in parallel.
  const int first_ring = n > R ? n - R : 0;
  for (int idx = tid; idx < (n - first_ring) * d; idx += kThreads) {
    const int i = first_ring + idx / d, c = idx % d;
    v.ring[(static_cast<size_t>(ring_slot(i)) * dims.n_heads + h) * d + c] = beacon_fps::StateBf16(query(i)[c]);
  }
  if (h == 0) {
    for (int i = first_ring + tid; i < n; i += kThreads) v.ring_pos[ring_slot(i)] = tok_pos[e.first_token + i];
  }

  // FPS: windows of at most shrink_size - size tokens (and one per thread),
  // so only a window's last token can make the buffer reach shrink_size.
  // Within a window the norms and the appends run in parallel; the order of
  // the appends (buffer index = arrival order among the accepted) is fixed
  // by thread 0.
  int size = *v.size;  // every thread tracks it; thread 0 stores it at the end
  // Read by every thread before the first barrier, written (by thread 0)
  // only after one.
  bool shrunk = v.inv[U - 1] != 0.0;
  const int phase = BeaconFpsPhase(static_cast<int64_t>(layer) * dims.n_heads + h,
                                   static_cast<int64_t>(dims.n_layers) * dims.n_heads, U, K);
  for (int i0 = 0; i0 < n;) {
    const int shrink_size = shrunk ? U : U - phase;  // ContinualFps::shrink_size
    int w = shrink_size - size < kThreads ? shrink_size - size : kThreads;
    if (w > n - i0) w = n - i0;
    if (tid < w) {
      const double norm2 = beacon_fps::SquaredNorm(query(i0 + tid), d);
      // ContinualFps::Add refuses the rest; BeaconPolicy never offers it a
      // token below fps_from_position.
      const bool ok = norm2 > 0.0 && isfinite(norm2) && tok_pos[e.first_token + i0 + tid] >= e.fps_from_position;
      win_inv[tid] = ok ? __ddiv_rn(1.0, __dsqrt_rn(norm2)) : 0.0;
      win_dst[tid] = ok;
    }
    __syncthreads();
    if (tid == 0) {
      int next = size;
      for (int j = 0; j < w; ++j) {
        if (!win_dst[j]) {
          win_dst[j] = -1;
          continue;
        }
        v.inv[next] = win_inv[j];
        v.tag[next] = tok_pos[e.first_token + i0 + j];
        win_dst[j] = next++;
      }
      new_size = next;
    }
    __syncthreads();
    for (int idx = tid; idx < w * d; idx += kThreads) {
      const int j = idx / d, c = idx - j * d;
      if (win_dst[j] >= 0) v.pts[static_cast<size_t>(win_dst[j]) * d + c] = beacon_fps::StateBf16(query(i0 + j)[c]);
    }
    size = new_size;
    if (size == shrink_size) {
      __syncthreads();  // the window's points are visible to the block
      beacon_fps::BlockFps(v.pts, v.inv, size, d, K, fs);
      CompactSurvivors(v, size, d, fs.min_dist);
      // A first shrink short of U leaves fps_inv[U - 1] as zeroed: mark it
      // (a shrink at U wrote a point's positive 1 / |q| there already).
      if (!shrunk && size < U && tid == 0) v.inv[U - 1] = -1.0;
      shrunk = true;
      size = K;
    }
    __syncthreads();  // win_* / new_size and the buffer are reused by the next window
    i0 += w;
  }
  if (tid == 0) *v.size = size;
}

}  // namespace

cudaError_t LaunchBeaconObserve(const BeaconDims& dims, int layer, const BeaconObserveEntry* entries, int n_entries,
                                int max_tokens_per_entry, const float* q_pre_rope, const int32_t* tok_pos,
                                cudaStream_t stream) {
  return LaunchBeaconObserveLayers(dims, layer, 1, entries, n_entries, max_tokens_per_entry, q_pre_rope, 0, tok_pos,
                                   stream);
}

cudaError_t LaunchBeaconObserveLayers(const BeaconDims& dims, int first_layer, int n_layers,
                                      const BeaconObserveEntry* entries, int n_entries, int max_tokens_per_entry,
                                      const float* q_pre_rope, int64_t q_layer_stride, const int32_t* tok_pos,
                                      cudaStream_t stream) {
  if (!BeaconDimsValid(dims) || first_layer < 0 || n_layers < 1 || n_layers > dims.n_layers - first_layer ||
      n_layers > 65535 || q_layer_stride < 0 || n_entries < 0 || n_entries > 65535 || max_tokens_per_entry < 0 ||
      dims.n_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (n_entries == 0 || max_tokens_per_entry == 0) return cudaSuccess;
  if (entries == nullptr || q_pre_rope == nullptr || tok_pos == nullptr) return cudaErrorInvalidValue;
  const BeaconStateLayout lay = BeaconStateLayout::For(dims);
  const size_t smem = beacon_fps::SmemBytes(dims.fps_bound, dims.head_dim);  // <= 35 KB at U = 4096, d = 256
  const dim3 grid(static_cast<unsigned>(dims.n_heads), static_cast<unsigned>(n_entries),
                  static_cast<unsigned>(n_layers));
  BeaconObserveKernel<<<grid, kThreads, smem, stream>>>(dims, lay, first_layer, entries, q_pre_rope, q_layer_stride,
                                                        tok_pos);
  return cudaGetLastError();
}

}  // namespace beacon
