// The emulated device as the runtime API describes it, its error codes, and
// the emulator's own findings (EMU ERROR / EMU WARNING lines, exit status).
//
// Contract:
//  - There is exactly one device, number 0, that looks like an H100/H200
//    (sm_90, 132 SMs, 227 KiB opt-in shared memory, 16 GiB): code that sizes
//    launches from the properties sees the numbers of the target part.
//  - Each distinct finding prints once to stderr. When the process ends, if
//    the emulator was used, a summary line prints; if any error was
//    reported, the process exits with status 3 even when every test passed,
//    so ctest (one process per test) fails the test that caused it.
//    EMU_ERRORS=report keeps the exit status of the program instead.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "emu_internal.h"

namespace emu::internal {
namespace {

constexpr int kErrorExitStatus = 3;

// Leaked on purpose: findings may still come from static destructors of the
// code under test (a backend freeing device memory at exit).
struct Findings {
  int errors = 0;
  int warnings = 0;
  std::set<std::string> printed;
  std::vector<std::string> recent;  // since the last TakeFindings
  bool used = false;
};
Findings& F() {
  static Findings* f = new Findings;
  return *f;
}

cudaError_t g_last_error = cudaSuccess;
int g_device = 0;

void AtExit() {
  Findings& f = F();
  std::fprintf(stderr, "EMU summary: %d error(s), %d warning(s) (distinct); CPU emulation, not a GPU run\n", f.errors,
               f.warnings);
  const char* mode = std::getenv("EMU_ERRORS");
  if (f.errors > 0 && !(mode != nullptr && std::strcmp(mode, "report") == 0)) {
    std::fprintf(stderr, "EMU: exiting with status %d because of the error(s) above\n", kErrorExitStatus);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(kErrorExitStatus);
  }
}

}  // namespace

void NoteUsed() {
  Findings& f = F();
  if (f.used) return;
  f.used = true;
  std::atexit(AtExit);
}

void Report(Severity severity, const std::string& message, bool once) {
  Findings& f = F();
  NoteUsed();
  if (once && !f.printed.insert(message).second) return;
  const bool error = severity == Severity::kError;
  (error ? f.errors : f.warnings)++;
  f.recent.push_back((error ? "ERROR: " : "WARNING: ") + message);
  std::fprintf(stderr, "EMU %s: %s\n", error ? "ERROR" : "WARNING", message.c_str());
}

std::vector<std::string> TakeFindings() {
  Findings& f = F();
  std::vector<std::string> out = std::move(f.recent);
  f.recent.clear();
  f.printed.clear();  // so that the same finding is reported (and seen) again
  f.errors = f.warnings = 0;
  return out;
}

void SetLastError(cudaError_t e) { g_last_error = e; }

}  // namespace emu::internal

using namespace emu::internal;

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return g_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

// The names double as descriptions: tests only print them.
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : cudaGetErrorName(e); }

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  NoteUsed();
  if (d != 0) return cudaErrorInvalidDevice;
  g_device = d;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* d) {
  *d = g_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return cudaErrorInvalidDevice;
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof p->name, "CPU emulation (beacon tests/cuda_emu)");
  p->totalGlobalMem = size_t{16} << 30;
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = kMaxDynamicSmem;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->multiProcessorCount = 132;
  p->major = 9;
  p->minor = 0;
  p->l2CacheSize = 50 << 20;
  return cudaSuccess;
}

cudaError_t cudaDeviceReset() { return cudaSuccess; }
