// LaunchBeaconGroupMeans (kernels/cuda/beacon_state.h): the group means that
// BeaconPolicy::ObserveQuery takes under beacon_group_queries, before the
// observe kernel stores them as the state heads' queries.
#include "kernels/cuda/beacon_state.h"

namespace beacon {
namespace {

constexpr int kThreads = 256;

// One block per token, threads striding over (state head, column): each
// output sums its group's inputs in head order from 0, as the CPU loop does,
// then divides (both rounded to nearest: no contraction is possible here).
__global__ void __launch_bounds__(kThreads)
    GroupMeanKernel(const float* __restrict__ q, int n_heads, int group, int d, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int n_out = n_heads / group;
  const float* row = q + t * n_heads * static_cast<int64_t>(d);
  float* o = out + t * n_out * static_cast<int64_t>(d);
  const float g = static_cast<float>(group);
  for (int i = threadIdx.x; i < n_out * d; i += kThreads) {
    const int s = i / d, c = i - s * d;
    float acc = 0.0f;
    for (int k = 0; k < group; ++k) acc = __fadd_rn(acc, row[static_cast<int64_t>(s * group + k) * d + c]);
    o[i] = __fdiv_rn(acc, g);
  }
}

}  // namespace

cudaError_t LaunchBeaconGroupMeans(const float* q, int64_t n_tokens, int n_heads, int group, int head_dim, float* out,
                                   cudaStream_t stream) {
  if (q == nullptr || out == nullptr || n_tokens < 0 || n_tokens > INT32_MAX || n_heads < 1 || group < 1 ||
      n_heads % group != 0 || head_dim < 1) {
    return cudaErrorInvalidValue;
  }
  if (n_tokens == 0) return cudaSuccess;
  GroupMeanKernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(q, n_heads, group, head_dim, out);
  return cudaGetLastError();
}

}  // namespace beacon
