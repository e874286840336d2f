// Kernels for the emulator's self-test (emu_selftest.cc). Each exercises one
// mechanism of the emulator; some carry a deliberate bug that the emulator
// must expose. The launches go through gen.py like the backend's kernels.
#ifndef BEACON_TESTS_CUDA_EMU_SELFTEST_SELFTEST_KERNELS_H_
#define BEACON_TESTS_CUDA_EMU_SELFTEST_SELFTEST_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace emu_selftest {

constexpr int kBlockThreads = 128;

// out[b] = sum of in[b * 128 .. b * 128 + 127], through shared memory.
// barrier == false drops the __syncthreads between the writes and the reads.
void BlockSum(const float* in, float* out, int blocks, bool barrier, cudaStream_t stream);
// out[i] = sum of in[0..31] for every lane i, by an xor-shuffle butterfly.
void WarpSum(const float* in, float* out, cudaStream_t stream);
// out[i] = in[i] for i < n (n <= smem_bytes / 4), staged in dynamic shared
// memory; set_attribute raises the kernel's limit to smem_bytes first.
cudaError_t CopyViaSharedMemory(const float* in, float* out, int n, size_t smem_bytes, bool set_attribute,
                                cudaStream_t stream);
// out[i] = in[i] for i < 128 via cp.async into shared memory; read_early
// reads shared memory before waiting for the copies.
void PipelinedCopy(const float* in, float* out, bool read_early, cudaStream_t stream);
// c = a * b for 16 x 16 matrices (a row-major bf16, b column-major bf16, c
// row-major fp32) with one warp through nvcuda::wmma; a is read from
// a + a_offset elements (an offset that is not a multiple of 16 misaligns it).
void WmmaProduct(const uint16_t* a, const uint16_t* b, float* c, int a_offset, cudaStream_t stream);
// x[i] *= factor for i < n.
void Scale(float* x, int n, float factor, cudaStream_t stream);
// Scale through cudaLaunchKernelEx: with programmatic stream serialization
// when `programmatic`; the kernel calls cudaGridDependencySynchronize first
// when `wait` (a programmatic launch without it is the bug).
cudaError_t ScaleLaunchEx(float* x, int n, float factor, bool programmatic, bool wait, cudaStream_t stream);
// Half of a warp shuffles while the other half waits at __syncthreads:
// every thread waits forever.
void Deadlock();

}  // namespace emu_selftest

#endif  // BEACON_TESTS_CUDA_EMU_SELFTEST_SELFTEST_KERNELS_H_
