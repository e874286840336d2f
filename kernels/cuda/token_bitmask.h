// A grammar's token masks applied to logits on the GPU (structured output,
// engine/grammar/): before the device sampler draws, every token a row's
// mask does not allow gets -inf, so the draw (greedy or sampled, with its
// filters) is among the allowed tokens only, as on the host
// (engine/sampler.h, Sampler::Sample's `allowed`).
//
// Memory layout (device pointers):
//   logits [n_rows, vocab]  f32, modified in place
//   masks  [n_rows, words]  uint32, words = (vocab + 31) / 32: token t of row
//                           r is allowed when bit t % 32 of masks[r][t / 32]
//                           is set (xgrammar's layout); a row with every bit
//                           set is untouched, which is how an unconstrained
//                           row of a mixed batch is passed
//
// Returns cudaErrorInvalidValue for null pointers, n_rows < 0 or > 65535
// (a grid dimension; a step has far fewer rows), or vocab <= 0; cudaSuccess without launching for n_rows == 0;
// otherwise the launch status. Asynchronous on `stream`, no allocation: capturable in a CUDA graph.
#ifndef BEACON_KERNELS_CUDA_TOKEN_BITMASK_H_
#define BEACON_KERNELS_CUDA_TOKEN_BITMASK_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace beacon {

inline int TokenMaskWords(int vocab) { return (vocab + 31) / 32; }

cudaError_t LaunchApplyTokenBitmask(float* logits, int64_t n_rows, int vocab, const uint32_t* masks,
                                    cudaStream_t stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_TOKEN_BITMASK_H_
