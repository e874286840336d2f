// Device and pinned host memory, and the synchronous and asynchronous copies
// and memsets between them.
//
// Contract:
//  - cudaMalloc memory is host memory of its own mapping, 256-byte aligned,
//    ending exactly at a PROT_NONE guard page (rounded up to 256 bytes, as
//    the CUDA allocator's granularity), with a guard page before it too: an
//    overrun past the end segfaults at once, where a GPU may read a
//    neighbour silently. Fresh memory holds 0xFF bytes (NaN as bf16 and f32),
//    so a result computed from unwritten device memory shows.
//  - cudaFree makes the range PROT_NONE and never reuses the addresses
//    (quarantine): a use after free faults instead of reading new data.
//  - Every copy checks its direction against where the pointers really are
//    (host, device) and that a device range stays inside one allocation; a
//    violation is reported and the call fails as the runtime would.
//  - Copies and memsets take effect at issue; their ordering against the
//    streams is checked by streams.cc (CheckLegacyUse and friends).
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "emu_internal.h"

namespace emu::internal {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kGranularity = 256;
constexpr size_t kDeviceBytes = size_t{16} << 30;

struct Allocation {
  uint64_t sequence;  // NextSequence() at allocation
  size_t bytes;       // as requested
  char* map_base;     // device: the whole mapping, guard pages included
  size_t map_bytes;
  bool pinned;  // cudaMallocHost rather than cudaMalloc
};
std::map<uintptr_t, Allocation> g_allocations;  // live, by start address
uint64_t g_sequence = 0;
size_t g_device_bytes = 0;

const std::pair<const uintptr_t, Allocation>* Find(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(a);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  return a < it->first + std::max<size_t>(it->second.bytes, 1) ? &*it : nullptr;
}

const char* Where(bool device) { return device ? "device" : "host"; }

cudaError_t CheckCopy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* what) {
  const bool dst_device = IsDeviceAddress(dst), src_device = IsDeviceAddress(src);
  struct Rule {
    const char* name;
    bool ok;
  };
  Rule rule{"Default", true};  // cudaMemcpyDefault: direction inferred from the pointers (UVA)
  switch (kind) {
    case cudaMemcpyHostToDevice: rule = {"HostToDevice", dst_device && !src_device}; break;
    case cudaMemcpyDeviceToHost: rule = {"DeviceToHost", src_device && !dst_device}; break;
    case cudaMemcpyDeviceToDevice: rule = {"DeviceToDevice", src_device && dst_device}; break;
    case cudaMemcpyHostToHost: rule = {"HostToHost", !src_device && !dst_device}; break;
    case cudaMemcpyDefault: break;
  }
  const bool ok = rule.ok;
  const char* kind_name = rule.name;
  if (!ok) {
    Report(Severity::kError,
           std::string(what) + ": " + kind_name + " with destination in " + Where(dst_device) +
               " memory and source in " + Where(src_device) + " memory",
           false);
    return cudaErrorInvalidValue;
  }
  if ((dst_device && !IsDeviceRange(dst, n)) || (src_device && !IsDeviceRange(src, n))) {
    Report(Severity::kError,
           std::string(what) + ": " + std::to_string(n) + " bytes run past the end of a device allocation", false);
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // namespace

uint64_t NextSequence() { return ++g_sequence; }

bool IsDeviceRange(const void* p, size_t bytes) {
  const auto* a = Find(p);
  if (a == nullptr || a->second.pinned) return false;
  return reinterpret_cast<uintptr_t>(p) + bytes <= a->first + a->second.bytes;
}
bool IsDeviceAddress(const void* p) {
  const auto* a = Find(p);
  return a != nullptr && !a->second.pinned;
}
bool IsPinnedAddress(const void* p) {
  const auto* a = Find(p);
  return a != nullptr && a->second.pinned;
}
uint64_t AllocationSequence(const void* p) {
  const auto* a = Find(p);
  return a != nullptr ? a->second.sequence : 0;
}

}  // namespace emu::internal

using namespace emu::internal;

cudaError_t cudaMalloc(void** p, size_t n) {
  NoteUsed();
  *p = nullptr;
  if (ProhibitedDuringCapture("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
  if (n == 0) return cudaSuccess;
  if (n > kDeviceBytes - g_device_bytes) return cudaErrorMemoryAllocation;
  const size_t rounded = (n + kGranularity - 1) / kGranularity * kGranularity;
  const size_t body = (rounded + kPage - 1) / kPage * kPage;
  const size_t map_bytes = body + 2 * kPage;
  char* base = static_cast<char*>(mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (base == MAP_FAILED) return cudaErrorMemoryAllocation;
  mprotect(base, kPage, PROT_NONE);
  mprotect(base + kPage + body, kPage, PROT_NONE);
  char* user = base + kPage + body - rounded;  // ends at the trailing guard page
  std::memset(user, 0xFF, rounded);
  g_allocations[reinterpret_cast<uintptr_t>(user)] = Allocation{NextSequence(), n, base, map_bytes, false};
  g_device_bytes += n;
  *p = user;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (ProhibitedDuringCapture("cudaFree")) return cudaErrorStreamCaptureUnsupported;
  if (p == nullptr) return cudaSuccess;
  const auto it = g_allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocations.end() || it->second.pinned) {
    Report(Severity::kError, "cudaFree of a pointer that cudaMalloc did not return (or freed twice)", false);
    return cudaErrorInvalidDevicePointer;
  }
  madvise(it->second.map_base, it->second.map_bytes, MADV_DONTNEED);  // give the pages back, keep the addresses
  mprotect(it->second.map_base, it->second.map_bytes, PROT_NONE);
  g_device_bytes -= it->second.bytes;
  g_allocations.erase(it);
  DeviceSynced();  // cudaFree synchronises the device
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t n) {
  NoteUsed();
  *p = nullptr;
  if (ProhibitedDuringCapture("cudaMallocHost")) return cudaErrorStreamCaptureUnsupported;
  *p = std::aligned_alloc(kPage, (std::max<size_t>(n, 1) + kPage - 1) / kPage * kPage);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xFF, n);
  g_allocations[reinterpret_cast<uintptr_t>(*p)] = Allocation{NextSequence(), n, nullptr, 0, true};
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t n, unsigned flags) { return cudaMallocHost(p, n); }

cudaError_t cudaFreeHost(void* p) {
  if (ProhibitedDuringCapture("cudaFreeHost")) return cudaErrorStreamCaptureUnsupported;
  if (p == nullptr) return cudaSuccess;
  const auto it = g_allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocations.end() || !it->second.pinned) {
    Report(Severity::kError, "cudaFreeHost of a pointer that cudaMallocHost did not return", false);
    return cudaErrorInvalidValue;
  }
  g_allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = kDeviceBytes;
  *free_bytes = kDeviceBytes - g_device_bytes;
  return cudaSuccess;
}

// Legacy-stream semantics of the synchronous copy: D2H returns when the copy
// (and all earlier legacy work) is done; D2D and pageable H2D may return
// before the data landed, so they stay pending on the legacy stream.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  NoteUsed();
  if (ProhibitedDuringCapture("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = CheckCopy(dst, src, n, kind, "cudaMemcpy"); e != cudaSuccess) return e;
  const bool dst_device = IsDeviceAddress(dst), src_device = IsDeviceAddress(src);
  CheckLegacyUse("cudaMemcpy", dst_device ? dst : src);
  if (src_device && !dst_device) {
    LegacyDrained();
  } else if (dst_device && (src_device || !IsPinnedAddress(src))) {
    LegacyIssued("cudaMemcpy to device (D2D, or pageable H2D whose DMA may not have landed)");
  }
  std::memmove(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  NoteUsed();
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = CheckCopy(dst, src, n, kind, "cudaMemcpyAsync"); e != cudaSuccess) return e;
  if (IsCapturing(s)) {
    const void* host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
    if (host != nullptr && !IsPinnedAddress(host)) {
      Report(Severity::kWarning, "cudaMemcpyAsync with pageable host memory captured into a graph");
    }
  }
  return Enqueue(s, "cudaMemcpyAsync", [=] { std::memmove(dst, src, n); });
}

// cudaMemset of device memory is asynchronous with respect to the host.
cudaError_t cudaMemset(void* p, int value, size_t n) {
  NoteUsed();
  if (ProhibitedDuringCapture("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
  if (n == 0) return cudaSuccess;
  if (!IsDeviceRange(p, n)) {
    Report(Severity::kError, "cudaMemset outside device memory", false);
    return cudaErrorInvalidValue;
  }
  CheckLegacyUse("cudaMemset", p);
  LegacyIssued("cudaMemset (asynchronous for device memory)");
  std::memset(p, value, n);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
  NoteUsed();
  if (n == 0) return cudaSuccess;
  if (!IsDeviceRange(p, n)) {
    Report(Severity::kError, "cudaMemsetAsync outside device memory", false);
    return cudaErrorInvalidValue;
  }
  return Enqueue(s, "cudaMemsetAsync", [=] { std::memset(p, value, n); });
}
