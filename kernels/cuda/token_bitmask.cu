#include <cmath>

#include "kernels/cuda/token_bitmask.h"

namespace beacon {
namespace {

constexpr int kThreads = 256;

// One thread per mask word: a word with every bit set (the common case of a
// grammar's wide open string, and every word of an unconstrained row) costs
// one load; otherwise its 32 logits are written where the bit is clear.
__global__ void __launch_bounds__(kThreads)
    ApplyTokenBitmaskKernel(float* logits, int vocab, int words, const uint32_t* __restrict__ masks) {
  const int64_t row = blockIdx.y;
  const int word = blockIdx.x * kThreads + threadIdx.x;
  if (word >= words) return;
  const uint32_t bits = masks[row * words + word];
  if (bits == 0xffffffffu) return;
  float* out = logits + row * vocab;
  const int first = word * 32;
  for (int b = 0; b < 32; ++b) {
    const int t = first + b;
    if (t < vocab && ((bits >> b) & 1u) == 0) out[t] = -INFINITY;
  }
}

}  // namespace

cudaError_t LaunchApplyTokenBitmask(float* logits, int64_t n_rows, int vocab, const uint32_t* masks,
                                    cudaStream_t stream) {
  if (logits == nullptr || masks == nullptr || n_rows < 0 || n_rows > 65535 || vocab <= 0) {
    return cudaErrorInvalidValue;
  }
  if (n_rows == 0) return cudaSuccess;
  const int words = TokenMaskWords(vocab);
  const dim3 grid((words + kThreads - 1) / kThreads, static_cast<unsigned>(n_rows));
  ApplyTokenBitmaskKernel<<<grid, kThreads, 0, stream>>>(logits, vocab, words, masks);
  return cudaGetLastError();
}

}  // namespace beacon
