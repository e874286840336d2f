// Interfaces between the emulator's own files; the code under test never
// includes this. One concept per file:
//   device.cc   findings (Report, exit status), device queries, error codes
//   fibers.cc   running one thread block: fibers, barriers, warps, cp.async
//   launch.cc   launch checks, block order, kernel attributes
//   memory.cc   device and pinned allocations, copies and memsets
//   streams.cc  streams, events, stream-order checks, capture and graphs
//   cublas.cc   cuBLAS handle and GEMM
// The emulator is single-threaded by contract: the CUDA backend and its tests
// call the runtime from one OS thread, and nothing here takes a lock.
#ifndef BEACON_TESTS_CUDA_EMU_EMU_INTERNAL_H_
#define BEACON_TESTS_CUDA_EMU_EMU_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_runtime.h"

namespace emu::internal {

// ---- findings (device.cc) --------------------------------------------------------
// An error is a misuse of CUDA that a GPU would punish (a race, a fault,
// undefined behaviour); a warning is legal but worth a look. Each distinct
// message prints once ("EMU ERROR: ..." on stderr) unless `once` is false.
// A process that reported an error exits with status 3 when it ends (even if
// every test passed), so that ctest fails the test that caused it; set
// EMU_ERRORS=report to only print.
enum class Severity { kWarning, kError };
void Report(Severity severity, const std::string& message, bool once = true);
// Marks the emulator as used, so that the exit summary prints.
void NoteUsed();
// For the emulator's self-test: the findings reported since the last call,
// "ERROR: ..." / "WARNING: ...", which no longer count for the exit status.
std::vector<std::string> TakeFindings();
// The error cudaGetLastError returns next (launch failures).
void SetLastError(cudaError_t e);

// ---- memory (memory.cc) ------------------------------------------------------------
// Issue counter shared by allocations and stream work: an allocation made
// after some work cannot be that work's operand.
uint64_t NextSequence();
// True when [p, p + bytes) lies inside one live cudaMalloc allocation.
bool IsDeviceRange(const void* p, size_t bytes);
// True when p lies inside a live cudaMalloc (resp. cudaMallocHost) allocation.
bool IsDeviceAddress(const void* p);
bool IsPinnedAddress(const void* p);
// Sequence number of the live allocation holding p, 0 when none.
uint64_t AllocationSequence(const void* p);

// ---- streams (streams.cc) -----------------------------------------------------------
bool IsValidStream(cudaStream_t s);
bool IsCapturing(cudaStream_t s);
// Runs `op` now (everything executes at issue, in issue order) or, when `s`
// is capturing, records it into the capture. Applies the capture rules and
// the stream-order checks to `what`.
cudaError_t Enqueue(cudaStream_t s, const char* what, std::function<void()> op);
// For the synchronous calls that CUDA forbids while a stream captures in
// global or thread-local mode: reports, invalidates the capture, returns true.
bool ProhibitedDuringCapture(const char* what);
// Legacy default stream bookkeeping for the synchronous copy and memset
// calls; `target`: the device memory they touch (null: unknown).
void CheckLegacyUse(const char* what, const void* target);
void LegacyIssued(const char* what);
void LegacyDrained();  // a D2H cudaMemcpy returned: earlier legacy work is done
void DeviceSynced();   // cudaDeviceSynchronize, cudaFree, event synchronisation

// ---- execution (fibers.cc) ------------------------------------------------------------
// Runs one block of `threads` threads of `body` to completion, with `smem`
// bytes of dynamic shared memory; blockIdx/gridDim/blockDim are already set.
// `programmatic`: a programmatic launch, whose every thread must call
// cudaGridDependencySynchronize before it returns (reported otherwise).
void RunBlock(const std::function<void()>& body, unsigned threads, size_t smem, bool programmatic);
// Largest dynamic shared memory a block may have (the H100/H200 opt-in limit).
constexpr size_t kMaxDynamicSmem = 232448;
// The kernel running now (for messages), "" outside kernels.
const char* CurrentKernel();
void SetCurrentKernel(const char* name);
// EMU_ORDER: the order in which threads (and blocks) are scheduled.
enum class Order { kForward, kReverse, kRandom };
Order ScheduleOrder();
void SetScheduleOrder(Order order);  // overrides EMU_ORDER (self-test)
// Deterministic pseudo-random sequence for Order::kRandom.
uint64_t NextRandom();

}  // namespace emu::internal

#endif  // BEACON_TESTS_CUDA_EMU_EMU_INTERNAL_H_
