#include <climits>

#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/cuda/swiglu.h"

namespace beacon {
namespace {

// One block per (token row, span of kSpan columns), threads striding over the
// span: accesses stay coalesced for any row stride, and a decode step's one
// or few rows still spread over many SMs (before, one block a row put a
// batch-1 step's 9,728-wide row on a single SM).
constexpr int kThreads = 256;
constexpr int kSpan = 2 * kThreads;

// No __restrict__: `out` may alias `gate` or `up` (each element is read and
// written by one thread).
__global__ void __launch_bounds__(kThreads)
    SwiGluKernel(const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t in_stride, __nv_bfloat16* out,
                 int64_t out_stride, int dim, int spans) {
  PdlEnter();
  const int64_t t = blockIdx.x / spans;
  const int first = static_cast<int>(blockIdx.x % spans) * kSpan;
  const int end = min(dim, first + kSpan);
  const __nv_bfloat16* g = gate + t * in_stride;
  const __nv_bfloat16* u = up + t * in_stride;
  __nv_bfloat16* o = out + t * out_stride;
  for (int i = first + static_cast<int>(threadIdx.x); i < end; i += kThreads) {
    const float gv = __bfloat162float(g[i]);
    const float uv = __bfloat162float(u[i]);
    // expf(-gv) overflows to inf for gv < -88: silu -> -0, the right limit.
    const float silu = gv / (1.0f + expf(-gv));
    o[i] = __float2bfloat16_rn(silu * uv);
  }
}

}  // namespace

cudaError_t LaunchSwiGlu(const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t in_stride, __nv_bfloat16* out,
                         int64_t out_stride, int64_t num_tokens, int dim, KernelStream stream) {
  const int spans = dim > 0 ? (dim - 1) / kSpan + 1 : 0;
  if (gate == nullptr || up == nullptr || out == nullptr || num_tokens < 0 || dim <= 0 || in_stride < dim ||
      out_stride < dim || num_tokens > INT32_MAX / spans) {
    return cudaErrorInvalidValue;
  }
  if (num_tokens == 0) return cudaSuccess;
  const LaunchConfig config(stream, static_cast<unsigned>(num_tokens * spans), kThreads, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), SwiGluKernel, gate, up, in_stride, out, out_stride, dim, spans));
}

}  // namespace beacon
