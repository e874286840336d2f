// FlashInfer's tensor-core decode (its batch prefill kernel, one query a
// sequence): the half of kernels/flashinfer/decode.h behind
// FlashInferKernel::kTensorCores, in decode_tensor_cores.cu. Called only by
// decode.cu, which checks the shape first.
#ifndef BEACON_KERNELS_FLASHINFER_DECODE_TENSOR_CORES_H_
#define BEACON_KERNELS_FLASHINFER_DECODE_TENSOR_CORES_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/flashinfer/decode.h"

namespace beacon::flashinfer_impl {

// Groups up to 16 (the query tile's 16 rows hold the group's heads of one
// query), head_dim 64 and 128.
bool TensorCoreSupports(int n_q_heads, int n_kv_heads, int head_dim);
cudaError_t TensorCoreWorkspaceBytes(int max_batch, int n_q_heads, int n_kv_heads, int head_dim, size_t* float_bytes,
                                     size_t* int_bytes);
cudaError_t TensorCorePlan(const int32_t* indptr_host, int batch, int n_q_heads, int n_kv_heads, int head_dim,
                           int page_size, const FlashInferDecodeWorkspace& ws, FlashInferDecodePlan* plan,
                           cudaStream_t stream);
cudaError_t TensorCoreLaunch(const PagedAttentionParams& p, const FlashInferPages& pages,
                             const FlashInferDecodePlan& plan, const FlashInferDecodeWorkspace& ws,
                             KernelStream stream);

}  // namespace beacon::flashinfer_impl

#endif  // BEACON_KERNELS_FLASHINFER_DECODE_TENSOR_CORES_H_
