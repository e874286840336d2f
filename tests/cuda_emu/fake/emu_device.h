// The CUDA execution model as the emulator presents it to kernel code:
// qualifiers, threadIdx/blockIdx, __syncthreads, warp collectives, atomics,
// dynamic shared memory, cp.async and the launch entry point that gen.py
// rewrites `kernel<<<grid, block, smem, stream>>>(args)` into.
// Included by cuda_runtime.h; see fibers.cc and launch.cc for the semantics.
//
// Contract: kernel code sees one CUDA thread at a time (a fiber, on the OS
// thread that launched the kernel); threads only interleave at the barriers
// declared here. A construct that the emulator cannot model faithfully
// (partial-mask warp operations, 2D/3D thread blocks) stops the process with a
// message instead of returning plausible values.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>

// Qualifiers become host C++. __shared__ variables are function-local statics:
// one instance shared by every thread of the (single running) block, which is
// the CUDA sharing rule. Unlike the hardware, their contents persist from one
// block to the next (README: limits).
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict
#define __shared__ static
#define __constant__ static

namespace emu {

// The running thread's coordinates; set by the scheduler before each switch.
extern uint3 thread_idx;
extern uint3 block_idx;
extern dim3 grid_dim;
extern dim3 block_dim;

// Barriers (fibers.cc). Each returns once every non-exited thread of the block
// (SyncThreads) or of the warp (the others) has arrived.
void SyncThreads();
void SyncWarp();
// Warp collectives: every lane of the warp must call them with a full mask.
// WarpExchange returns lane `src_lane`'s `value`; WarpGather fills all32[i]
// with lane i's value.
uint64_t WarpExchange(uint64_t value, int src_lane);
void WarpGather(uint64_t value, uint64_t* all32);
// WarpShare: every lane passes `bytes` bytes (the same count in every lane);
// all[i * bytes ...] receives lane i's. For collectives on wider values
// (wmma fragments, mma.h).
void WarpShare(const void* mine, size_t bytes, void* all);
// Aborts on a mask other than 0xffffffff (partial warps are not modelled).
void RequireFullMask(unsigned mask, const char* what);
// Reports a misuse found by a stand-in header (EMU ERROR, exit status 3),
// prefixed with the running kernel's name.
void KernelError(const char* what);
// The running block's dynamic shared memory: poisoned with 0xFF bytes at the
// start of each block and ending at a guard page (an overrun faults).
void* DynamicSharedMemory();

// cp.async (cuda_pipeline.h), per thread: copies issued, then committed as a
// group, land at the matching wait (EMU_PIPELINE=lazy, the default; until
// then the destination holds 0xFF) or at issue (EMU_PIPELINE=eager).
void PipelineCopy(void* dst, const void* src, size_t bytes);
void PipelineCommit();
void PipelineWaitPrior(int groups_in_flight);

// Launch (launch.cc). gen.py rewrites `kernel<<<grid, block, smem, stream>>>(args)`
// into LaunchKernel("file.cu:kernel", kernel, grid, block, smem, stream, args).
// As at a CUDA launch, the arguments are evaluated and converted to the
// kernel's parameter types once, at the launch, and the kernel (and every
// replay of a graph that captured it) sees those copies.
struct ArgSpan {
  enum Kind { kScalar, kPointer, kAggregate };
  const void* data;
  size_t bytes;
  Kind kind;
};
// `name` must have static storage (graphs keep it); `args` describe the
// converted arguments, scanned for host pointers. `programmatic`: launched
// with cudaLaunchAttributeProgrammaticStreamSerialization (programmatic
// dependent launch), so every thread must call cudaGridDependencySynchronize
// before it returns (fibers.cc checks). Returns the launch's error (also
// what cudaGetLastError returns next).
cudaError_t Launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   std::function<void()> body, const ArgSpan* args, size_t n_args, bool programmatic = false);
template <class T>
ArgSpan DescribeArg(const T& v) {
  const ArgSpan::Kind kind = std::is_pointer_v<T>                           ? ArgSpan::kPointer
                             : std::is_arithmetic_v<T> || std::is_enum_v<T> ? ArgSpan::kScalar
                                                                            : ArgSpan::kAggregate;
  return ArgSpan{&v, sizeof(T), kind};
}
template <class... Params, class... Args>
void LaunchKernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with a different number of arguments");
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  const auto spans =
      std::apply([](const auto&... p) { return std::array<ArgSpan, sizeof...(p)>{DescribeArg(p)...}; }, params);
  Launch(
      name, reinterpret_cast<const void*>(kernel), grid, block, smem, stream,
      [kernel, params] { std::apply(kernel, params); }, spans.data(), spans.size());
}
// gen.py's rewrite of cudaLaunchKernelEx(config, kernel, args): the launch of
// LaunchKernel with the configuration's grid, block, shared memory and
// stream, and its attributes (only programmatic stream serialization is
// modelled; any other attribute id is reported).
bool ProgrammaticAttribute(const cudaLaunchConfig_t* config);
template <class... Params, class... Args>
cudaError_t LaunchKernelEx(const char* name, const cudaLaunchConfig_t* config, void (*kernel)(Params...),
                           Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with a different number of arguments");
  const bool programmatic = ProgrammaticAttribute(config);
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  const auto spans =
      std::apply([](const auto&... p) { return std::array<ArgSpan, sizeof...(p)>{DescribeArg(p)...}; }, params);
  return Launch(
      name, reinterpret_cast<const void*>(kernel), config->gridDim, config->blockDim, config->dynamicSmemBytes,
      config->stream, [kernel, params] { std::apply(kernel, params); }, spans.data(), spans.size(), programmatic);
}
// Programmatic dependent launch, device side (fibers.cc): the calling thread
// waits for the previous kernel in the stream (here: it has run already) and
// lets the next one launch.
void GridDependencySynchronize();
void TriggerProgrammaticLaunchCompletion();
cudaError_t FuncSetAttribute(const void* kernel, int attr, int value);

// Values travel through warp collectives as up to 8 raw bytes.
template <class T>
uint64_t ToBits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp collective on a type wider than 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T FromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
// Source lane of a shuffle within segments of `width` lanes, CUDA's rules:
// an out-of-segment source yields the caller's own value.
enum class ShuffleKind { kIndex, kDown, kUp, kXor };
inline int ShuffleSource(ShuffleKind kind, int arg, int width) {
  const int lane = static_cast<int>(thread_idx.x % 32);
  const int base = lane & ~(width - 1), sub = lane & (width - 1);
  switch (kind) {
    case ShuffleKind::kIndex: return base + (arg & (width - 1));
    case ShuffleKind::kDown: return sub + arg < width ? lane + arg : lane;
    case ShuffleKind::kUp: return sub - arg >= 0 ? lane - arg : lane;
    case ShuffleKind::kXor: return (sub ^ arg) < width ? base + (sub ^ arg) : lane;
  }
  return lane;
}

}  // namespace emu

#define threadIdx (::emu::thread_idx)
#define blockIdx (::emu::block_idx)
#define gridDim (::emu::grid_dim)
#define blockDim (::emu::block_dim)
inline constexpr int warpSize = 32;

// ---- barriers and warp collectives ----------------------------------------------
inline void __syncthreads() { emu::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  emu::RequireFullMask(mask, "__syncwarp");
  emu::SyncWarp();
}
// Programmatic dependent launch (sm_90): CUDA's device functions.
inline void cudaGridDependencySynchronize() { emu::GridDependencySynchronize(); }
inline void cudaTriggerProgrammaticLaunchCompletion() { emu::TriggerProgrammaticLaunchCompletion(); }
// Every write is visible at once on one OS thread: fences order nothing more.
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  emu::RequireFullMask(mask, "__shfl_sync");
  return emu::FromBits<T>(emu::WarpExchange(emu::ToBits(v), emu::ShuffleSource(emu::ShuffleKind::kIndex, src, width)));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  emu::RequireFullMask(mask, "__shfl_down_sync");
  return emu::FromBits<T>(emu::WarpExchange(emu::ToBits(v), emu::ShuffleSource(emu::ShuffleKind::kDown, delta, width)));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  emu::RequireFullMask(mask, "__shfl_up_sync");
  return emu::FromBits<T>(emu::WarpExchange(emu::ToBits(v), emu::ShuffleSource(emu::ShuffleKind::kUp, delta, width)));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  emu::RequireFullMask(mask, "__shfl_xor_sync");
  return emu::FromBits<T>(
      emu::WarpExchange(emu::ToBits(v), emu::ShuffleSource(emu::ShuffleKind::kXor, lane_mask, width)));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  emu::RequireFullMask(mask, "__ballot_sync");
  uint64_t all[32];
  emu::WarpGather(predicate != 0, all);
  unsigned bits = 0;
  for (int j = 0; j < 32; ++j) bits |= (all[j] != 0 ? 1u : 0u) << j;
  return bits;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == 0xffffffffu; }
template <class T>
unsigned __match_any_sync(unsigned mask, T v) {
  emu::RequireFullMask(mask, "__match_any_sync");
  uint64_t all[32];
  const uint64_t mine = emu::ToBits(v);
  emu::WarpGather(mine, all);
  unsigned bits = 0;
  for (int j = 0; j < 32; ++j) bits |= (all[j] == mine ? 1u : 0u) << j;
  return bits;
}

// ---- atomics ------------------------------------------------------------------
// Threads switch only at barriers, so a plain read-modify-write is atomic
// here. The operand type follows the pointer (as CUDA's overloads do).
template <class T>
T atomicAdd(T* p, std::type_identity_t<T> v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
T atomicOr(T* p, std::type_identity_t<T> v) {
  const T old = *p;
  *p = old | v;
  return old;
}
template <class T>
T atomicAnd(T* p, std::type_identity_t<T> v) {
  const T old = *p;
  *p = old & v;
  return old;
}
template <class T>
T atomicMax(T* p, std::type_identity_t<T> v) {
  const T old = *p;
  *p = old > v ? old : v;
  return old;
}
template <class T>
T atomicMin(T* p, std::type_identity_t<T> v) {
  const T old = *p;
  *p = old < v ? old : v;
  return old;
}
template <class T>
T atomicExch(T* p, std::type_identity_t<T> v) {
  const T old = *p;
  *p = v;
  return old;
}
template <class T>
T atomicCAS(T* p, std::type_identity_t<T> compare, std::type_identity_t<T> v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

// Cache-hinted loads are plain loads.
template <class T>
T __ldg(const T* p) {
  return *p;
}
