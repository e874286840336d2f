// Kernel launches: the checks a GPU applies at launch, a heuristic check of
// the arguments, and the grid loop (one block at a time, fibers.cc).
//
// Contract of emu::Launch (the target of gen.py's rewrite of <<<...>>>):
//  - An invalid configuration (no threads, > 1024 threads per block, a grid
//    dimension out of range) or more than 48 KiB of dynamic shared memory
//    without a matching cudaFuncSetAttribute fails the launch: nothing runs
//    and cudaGetLastError returns the error, as on the device. The emulator
//    also reports it, since the backend should never launch like that.
//  - 2D/3D thread blocks are not emulated: the process aborts.
//  - Otherwise the launch is a stream operation (streams.cc): it runs at
//    issue or is recorded into a capture. Blocks run one at a time in index
//    order (or reversed, or shuffled, per EMU_ORDER), which also exposes a
//    kernel that depends on the order of blocks.
//  - A programmatic launch (cudaLaunchKernelEx with programmatic stream
//    serialization) runs like any other, and every one of its threads must
//    call cudaGridDependencySynchronize before it returns (fibers.cc).
//  - Host-pointer check: a pointer argument, or an aligned word of a struct
//    argument, that holds an address inside a readable, non-executable host
//    mapping, and is neither device memory nor just past its end, is
//    reported as a host pointer passed to the device (on a GPU: a fault or
//    garbage). For struct arguments this is a heuristic: an integer field
//    pair that happens to look like such an address would be a false report.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "emu_internal.h"

namespace emu {
namespace internal {
namespace {

std::map<const void*, int> g_max_dynamic_smem;  // by kernel address (cudaFuncSetAttribute)

struct Mapping {
  uintptr_t lo, hi;
  bool readable, executable;
};
std::vector<Mapping> g_maps;  // /proc/self/maps, reloaded when an address is not found

void LoadMaps() {
  g_maps.clear();
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
    g_maps.push_back({lo, hi, perms[0] == 'r', perms[2] == 'x'});
  }
}

const Mapping* FindMapping(uintptr_t a) {
  for (const Mapping& m : g_maps) {
    if (a >= m.lo && a < m.hi) return &m;
  }
  return nullptr;
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The finding for one argument word `w` at byte `offset` of argument `index`.
void CheckWord(const char* name, size_t index, size_t offset, uint64_t w) {
  if (w < 0x10000 || w >= 0x800000000000ull) return;  // not a user-space address
  const void* p = reinterpret_cast<const void*>(w);
  if (IsDeviceAddress(p) || IsDeviceAddress(static_cast<const char*>(p) - 1)) return;  // in, or an end pointer
  const std::string where = std::string("kernel ") + name + ": argument " + std::to_string(index) +
                            (offset > 0 ? " (at byte " + std::to_string(offset) + ")" : "");
  if (IsPinnedAddress(p)) {
    Report(Severity::kWarning, where + " points into pinned host memory (zero-copy access over PCIe)");
    return;
  }
  const Mapping* m = FindMapping(w);
  if (m == nullptr) {
    LoadMaps();
    m = FindMapping(w);
  }
  if (m == nullptr || !m->readable || m->executable) return;
  Report(Severity::kError, where + " = " + Hex(w) + " is a HOST address (mapped host memory, not device memory)");
}

void CheckArguments(const char* name, const ArgSpan* args, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const ArgSpan& a = args[i];
    if (a.kind == ArgSpan::kPointer) {
      uint64_t w = 0;
      std::memcpy(&w, a.data, sizeof(void*));
      CheckWord(name, i, 0, w);
    } else if (a.kind == ArgSpan::kAggregate) {
      // A struct of parameters: every aligned word that could be a pointer
      // to 4-byte or wider data (what the kernels' structs hold).
      for (size_t off = 0; off + 8 <= a.bytes; off += 8) {
        uint64_t w;
        std::memcpy(&w, static_cast<const char*>(a.data) + off, 8);
        if (w % 4 == 0) CheckWord(name, i, off, w);
      }
    }
  }
}

void RunGrid(const char* name, dim3 grid, dim3 block, size_t smem, bool programmatic,
             const std::function<void()>& body) {
  const char* outer = CurrentKernel();
  SetCurrentKernel(name);
  grid_dim = grid;
  block_dim = block;
  const uint64_t n = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  std::vector<uint64_t> blocks(n);
  const Order order = ScheduleOrder();
  for (uint64_t i = 0; i < n; ++i) blocks[i] = order == Order::kReverse ? n - 1 - i : i;
  if (order == Order::kRandom) {
    for (uint64_t i = n - 1; i > 0; --i) std::swap(blocks[i], blocks[NextRandom() % (i + 1)]);
  }
  for (const uint64_t b : blocks) {
    block_idx = {static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                 static_cast<unsigned>(b / grid.x / grid.y)};
    RunBlock(body, block.x, smem, programmatic);
  }
  SetCurrentKernel(outer);
}

}  // namespace
}  // namespace internal

using namespace internal;

cudaError_t FuncSetAttribute(const void* kernel, int attr, int value) {
  NoteUsed();
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kMaxDynamicSmem) return cudaErrorInvalidValue;
    g_max_dynamic_smem[kernel] = value;
  }
  return cudaSuccess;
}

bool ProgrammaticAttribute(const cudaLaunchConfig_t* config) {
  bool programmatic = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const cudaLaunchAttribute& a = config->attrs[i];
    if (a.id == cudaLaunchAttributeProgrammaticStreamSerialization) {
      programmatic = a.val.programmaticStreamSerializationAllowed != 0;
    } else if (a.id != cudaLaunchAttributeIgnore) {
      Report(Severity::kError,
             "cudaLaunchKernelEx: launch attribute " + std::to_string(static_cast<int>(a.id)) + " is not emulated");
    }
  }
  return programmatic;
}

cudaError_t Launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   std::function<void()> body, const ArgSpan* args, size_t n_args, bool programmatic) {
  NoteUsed();
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  cudaError_t err = cudaSuccess;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    Report(Severity::kError,
           std::string("kernel ") + name + ": invalid launch configuration grid (" + std::to_string(grid.x) + "," +
               std::to_string(grid.y) + "," + std::to_string(grid.z) + ") block (" + std::to_string(block.x) + "," +
               std::to_string(block.y) + "," + std::to_string(block.z) + ")",
           false);
    err = cudaErrorInvalidConfiguration;
  } else if (block.y != 1 || block.z != 1) {
    std::fprintf(stderr, "EMU FATAL: kernel %s: 2D/3D thread blocks are not emulated\n", name);
    std::abort();
  } else if (smem > 48 * 1024) {
    const auto it = g_max_dynamic_smem.find(kernel);
    if (it == g_max_dynamic_smem.end() || static_cast<size_t>(it->second) < smem) {
      Report(Severity::kError,
             std::string("kernel ") + name + ": " + std::to_string(smem) +
                 " bytes of dynamic shared memory without cudaFuncSetAttribute allowing them",
             false);
      err = cudaErrorInvalidValue;
    }
  }
  if (err != cudaSuccess) {
    SetLastError(err);
    return err;
  }
  CheckArguments(name, args, n_args);
  err = Enqueue(stream, name, [name, grid, block, smem, programmatic, body = std::move(body)] {
    RunGrid(name, grid, block, smem, programmatic, body);
  });
  if (err != cudaSuccess) SetLastError(err);
  return err;
}

}  // namespace emu
