// Kernels for the emulator's self-test; see selftest_kernels.h. Valid CUDA,
// though only ever compiled through gen.py.
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include "tests/cuda_emu/selftest/selftest_kernels.h"

namespace emu_selftest {
namespace {

__global__ void BlockSumKernel(const float* in, float* out, bool barrier) {
  __shared__ float partial[kBlockThreads];
  partial[threadIdx.x] = in[blockIdx.x * kBlockThreads + threadIdx.x];
  if (barrier) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int i = 0; i < kBlockThreads; ++i) s += partial[i];
    out[blockIdx.x] = s;
  }
}

__global__ void WarpSumKernel(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  out[threadIdx.x] = v;
}

__global__ void SharedCopyKernel(const float* in, float* out, int n) {
  extern __shared__ float staged[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[n - 1 - i] = staged[n - 1 - i];
}

__global__ void PipelinedCopyKernel(const float* in, float* out, bool read_early) {
  extern __shared__ __align__(16) float tile[];
  __pipeline_memcpy_async(&tile[threadIdx.x], &in[threadIdx.x], sizeof(float));
  __pipeline_commit();
  if (!read_early) __pipeline_wait_prior(0);
  out[threadIdx.x] = tile[threadIdx.x];
  __pipeline_wait_prior(0);
}

__global__ void WmmaProductKernel(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  namespace wmma = nvcuda::wmma;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

__global__ void ScaleKernel(float* x, int n, float factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void ScaleAfterWaitKernel(float* x, int n, float factor, bool wait) {
  if (wait) cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void DeadlockKernel(float* sink) {
  if (threadIdx.x < 16) {
    sink[threadIdx.x] = __shfl_sync(0xffffffffu, 1.f, 0);
  } else {
    __syncthreads();
  }
}

}  // namespace

void BlockSum(const float* in, float* out, int blocks, bool barrier, cudaStream_t stream) {
  BlockSumKernel<<<blocks, kBlockThreads, 0, stream>>>(in, out, barrier);
}

void WarpSum(const float* in, float* out, cudaStream_t stream) { WarpSumKernel<<<1, 32, 0, stream>>>(in, out); }

cudaError_t CopyViaSharedMemory(const float* in, float* out, int n, size_t smem_bytes, bool set_attribute,
                                cudaStream_t stream) {
  if (set_attribute) {
    const cudaError_t e = cudaFuncSetAttribute(SharedCopyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem_bytes));
    if (e != cudaSuccess) return e;
  }
  SharedCopyKernel<<<1, kBlockThreads, smem_bytes, stream>>>(in, out, n);
  return cudaGetLastError();
}

void PipelinedCopy(const float* in, float* out, bool read_early, cudaStream_t stream) {
  PipelinedCopyKernel<<<1, kBlockThreads, kBlockThreads * sizeof(float), stream>>>(in, out, read_early);
}

void WmmaProduct(const uint16_t* a, const uint16_t* b, float* c, int a_offset, cudaStream_t stream) {
  WmmaProductKernel<<<1, 32, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(a) + a_offset,
                                          reinterpret_cast<const __nv_bfloat16*>(b), c);
}

void Scale(float* x, int n, float factor, cudaStream_t stream) {
  ScaleKernel<<<(n + kBlockThreads - 1) / kBlockThreads, kBlockThreads, 0, stream>>>(x, n, factor);
}

cudaError_t ScaleLaunchEx(float* x, int n, float factor, bool programmatic, bool wait, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = programmatic ? 1 : 0;
  // {gridDim, blockDim, dynamicSmemBytes, stream, attrs, numAttrs}: gridDim
  // and blockDim are the emulator's macros, so the fields go by position.
  const cudaLaunchConfig_t config{
      dim3((n + kBlockThreads - 1) / kBlockThreads), dim3(kBlockThreads), 0, stream, attr, 1};
  return cudaLaunchKernelEx(&config, ScaleAfterWaitKernel, x, n, factor, wait);
}

void Deadlock() {
  float* sink = nullptr;
  cudaMalloc(&sink, 32 * sizeof(float));
  DeadlockKernel<<<1, 32>>>(sink);
}

}  // namespace emu_selftest
