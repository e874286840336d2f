// Token embedding lookup: gathers rows of a bf16 table by int32 token ids.
//
// Memory layout (device pointers, bf16 row-major, rows contiguous):
//   table [vocab, dim]       the embedding matrix (token_embd / embed_tokens)
//   ids   [num_tokens]       int32 token ids of the flattened ragged batch
//   out   [num_tokens, dim]  out[t] = table[ids[t]]
//
// An id outside [0, vocab) never reads out of bounds: its row of `out` is
// zero-filled and, when `error_flag` is non-null, *error_flag is set to 1.
// The kernel never clears the flag; the caller zeroes it (cudaMemsetAsync)
// before the launch and reads it back when it next synchronises, turning a
// non-zero value into an error Status at the engine boundary. Bad ids are the
// engine's bug (the server validates ids), so this is a guard, not a path.
//
// Returns cudaErrorInvalidValue for null table/ids/out, vocab <= 0, dim <= 0
// or num_tokens < 0; cudaSuccess without launching for num_tokens == 0;
// otherwise the launch status. Asynchronous on `stream`.
#ifndef BEACON_KERNELS_CUDA_EMBEDDING_H_
#define BEACON_KERNELS_CUDA_EMBEDDING_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

cudaError_t LaunchEmbedding(const __nv_bfloat16* table, int64_t vocab, int dim, const int32_t* ids, int64_t num_tokens,
                            __nv_bfloat16* out, int32_t* error_flag, KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_EMBEDDING_H_
