// The tensor-core split kernel of decode attention (decode_attention_mma.cu),
// for LaunchDecodeAttention (decode_attention.cu) only: callers choose it
// with DecodeAttentionKernel::kMma (kernels/cuda/paged_attention.h).
//
// Why a second kernel: the CUDA-core split kernel does every score and every
// P V product in fp32 FMAs, 2 * group * head_dim per key (1,792 at
// R1-Distill-Qwen-7B's group of 7, 3.5 per byte of K/V read): near half the
// SM's fp32 rate at HBM speed before its loads and barriers, so at batch
// 16-64 it cannot keep up with the memory. Here the group's query heads
// (padded to 16 rows) are the M of two small GEMMs per tile, on tensor cores
// (nvcuda::wmma, bf16 in, fp32 accumulate): S = Q K^T and O += P V.
#ifndef BEACON_KERNELS_CUDA_DECODE_ATTENTION_MMA_H_
#define BEACON_KERNELS_CUDA_DECODE_ATTENTION_MMA_H_

#include <cuda_runtime.h>

#include "kernels/cuda/kernel_stream.h"
#include "kernels/cuda/paged_attention.h"

namespace beacon {

// The shapes the tensor-core kernel takes: head_dim 64 or 128 (every model
// we serve); others run on the CUDA-core kernel.
bool DecodeMmaSupports(const PagedAttentionParams& p);

// Same grid, partitions, workspace layout and direct writes as the CUDA-core
// split kernel, so DecodeMergeKernel merges either. p valid, shape
// supported, workspace pointers as LaunchDecodeAttention carves them.
cudaError_t LaunchDecodeMmaSplit(const PagedAttentionParams& p, int max_splits, float* ws_acc, float* ws_m, float* ws_l,
                                 KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_DECODE_ATTENTION_MMA_H_
