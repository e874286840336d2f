// Running one thread block: a cooperative fiber per CUDA thread, on the OS
// thread that launched the kernel.
//
// Why fibers: the threads of a block meet at __syncthreads and at warp
// collectives, so they cannot run one after another to completion. Fibers
// interleave them exactly at those points, deterministically (one schedule
// per EMU_ORDER), with switches that cost a few instructions and no data
// races inside the emulator itself.
//
// Contract:
//  - A thread runs until it arrives at a barrier or returns; then the next
//    unfinished thread in the scheduling order runs (EMU_ORDER=forward, the
//    default, reverse or random). Code between two barriers thus runs thread
//    after thread in that order. A missing barrier makes a thread read data
//    that another order has not written yet: running the tests under both
//    orders exposes it.
//  - A barrier completes when every thread that has not exited has arrived.
//    If all live threads wait and none can complete a barrier, the process
//    aborts ("EMU FATAL: deadlock"): on a GPU that kernel would hang.
//  - An exited thread stops counting for barriers. A __syncthreads completed
//    by an exit (non-uniform return) is a warning, a warp collective missing
//    lanes an error.
//  - Dynamic shared memory is 0xFF-poisoned at the start of every block (an
//    unwritten float reads as NaN) and ends at a guard page.
//  - In a programmatic launch (programmatic dependent launch: the kernel may
//    start before the previous one in its stream has finished), a thread
//    that returns without calling cudaGridDependencySynchronize is an error:
//    it may have read that kernel's output before it was written, and its
//    block may finish before that kernel does, so the next kernel, which
//    waits only for this one, would not wait for it either. Reading before
//    the call cannot be seen here; the kernels make it their first statement.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "emu_internal.h"

// emu_fiber_switch(save_sp, next_sp): pushes the callee-saved registers of the
// System V x86-64 ABI on the current stack, stores the stack pointer in
// *save_sp, switches to next_sp, pops that fiber's registers and returns into
// it: where it last switched out, or into FiberMain for a fresh stack laid
// out by RunBlock. Everything else the ABI lets a call clobber.
extern "C" void emu_fiber_switch(void** save_sp, void* next_sp);
asm(R"(
  .pushsection .text
  .p2align 4
  .globl emu_fiber_switch
  .type emu_fiber_switch, @function
emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_fiber_switch, .-emu_fiber_switch
  .popsection
)");

namespace emu {
uint3 thread_idx{0, 0, 0};
uint3 block_idx{0, 0, 0};
dim3 grid_dim;
dim3 block_dim;
}  // namespace emu

namespace emu::internal {
namespace {

constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 512 << 10;  // per thread, reserved lazily (MAP_NORESERVE)
constexpr size_t kPage = 4096;

struct AsyncCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
struct Fiber {
  void* sp = nullptr;
  char* stack = nullptr;  // lowest page is a guard page
  bool done = false;
  bool grid_waited = false;                      // called cudaGridDependencySynchronize
  std::vector<AsyncCopy> issued;                 // cp.async since the last commit
  std::deque<std::vector<AsyncCopy>> committed;  // groups not yet waited for
};
struct Barrier {
  int members = 0;  // threads that still take part
  int arrived = 0;
  uint64_t generation = 0;  // bumped at each completion
};
struct Warp {
  Barrier barrier;
  int lanes = 0;  // at launch; < 32 only in a partial last warp
  uint64_t slots[32];
  std::vector<unsigned char> share;  // WarpShare's 32 lanes' bytes
};

struct Scheduler {
  bool initialised = false;
  Order order_mode = Order::kForward;
  bool lazy_pipeline = true;
  uint64_t random_state = 0x9E3779B97F4A7C15ull;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier block_barrier;
  std::vector<int> order, rank;  // rank[order[i]] == i
  int current = -1;
  int live = 0;     // threads that have not exited
  int waiting = 0;  // threads blocked at a barrier
  void* launcher_sp = nullptr;
  const std::function<void()>* body = nullptr;
  char* smem_region = nullptr;  // kMaxDynamicSmem bytes (page-rounded), then a guard page
  char* smem_end = nullptr;
  char* dynamic_smem = nullptr;
  const char* kernel = "";
  bool programmatic = false;  // the running launch is programmatic (RunBlock)
};
Scheduler g;

void Initialise() {
  if (g.initialised) return;
  g.initialised = true;
  if (const char* o = std::getenv("EMU_ORDER"); o != nullptr) {
    const std::string s = o;
    g.order_mode = s == "reverse" ? Order::kReverse : s == "random" ? Order::kRandom : Order::kForward;
  }
  if (const char* seed = std::getenv("EMU_SEED"); seed != nullptr) g.random_state ^= std::strtoull(seed, nullptr, 0);
  const char* p = std::getenv("EMU_PIPELINE");
  g.lazy_pipeline = !(p != nullptr && std::string(p) == "eager");

  g.fibers.resize(kMaxThreads);
  char* stacks = static_cast<char*>(mmap(nullptr, kStackBytes * kMaxThreads, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  const size_t smem_bytes = (kMaxDynamicSmem + kPage - 1) / kPage * kPage;
  g.smem_region =
      static_cast<char*>(mmap(nullptr, smem_bytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (stacks == MAP_FAILED || g.smem_region == MAP_FAILED) {
    std::fprintf(stderr, "EMU FATAL: cannot map fiber stacks / shared memory\n");
    std::abort();
  }
  for (int i = 0; i < kMaxThreads; ++i) {
    g.fibers[i].stack = stacks + i * kStackBytes;
    mprotect(g.fibers[i].stack, kPage, PROT_NONE);  // a stack overflow faults
  }
  g.smem_end = g.smem_region + smem_bytes;
  mprotect(g.smem_end, kPage, PROT_NONE);
}

std::string InKernel() { return std::string("kernel ") + g.kernel + ": "; }

[[noreturn]] void Deadlock(const char* where) {
  std::fprintf(stderr, "EMU FATAL: deadlock in %sblock (%u,%u,%u) at %s: all %d live threads wait\n",
               InKernel().c_str(), block_idx.x, block_idx.y, block_idx.z, where, g.live);
  std::abort();
}

void SwitchTo(int next) {
  const int prev = g.current;
  g.current = next;
  thread_idx = {static_cast<unsigned>(next), 0, 0};
  emu_fiber_switch(&g.fibers[prev].sp, g.fibers[next].sp);
}

// The next unfinished thread after the current one in the scheduling order.
int NextThread() {
  const int n = static_cast<int>(g.order.size());
  for (int k = 1; k <= n; ++k) {
    const int t = g.order[(g.rank[g.current] + k) % n];
    if (!g.fibers[t].done) return t;
  }
  return -1;
}

// `waiters`: threads blocked on `b` that this completion resumes.
void Release(Barrier& b, int waiters) {
  g.waiting -= waiters;
  b.arrived = 0;
  ++b.generation;
}

void Wait(Barrier& b, const char* where) {
  const uint64_t generation = b.generation;
  if (++b.arrived >= b.members) {  // the last arrival completes it and runs on
    Release(b, b.arrived - 1);
    return;
  }
  ++g.waiting;
  while (b.generation == generation) {
    if (g.waiting >= g.live) Deadlock(where);
    SwitchTo(NextThread());
  }
}

void Land(std::vector<AsyncCopy>& copies) {
  for (const AsyncCopy& c : copies) std::memcpy(c.dst, c.src, c.bytes);
  copies.clear();
}

Warp& CurrentWarp() { return g.warps[thread_idx.x / 32]; }

void RequireWholeWarp(const Warp& w, const char* what) {
  if (w.barrier.members < 32) {
    Report(Severity::kError, InKernel() + what + " in a warp with " + std::to_string(w.barrier.members) +
                                 " live lanes (full mask over missing or exited lanes)");
  }
}

// Entry of every fiber; never returns (its stack has no caller).
[[noreturn]] void FiberMain() {
  (*g.body)();
  Fiber& me = g.fibers[g.current];
  if (g.programmatic && !me.grid_waited) {
    Report(Severity::kError, InKernel() +
                                 "a thread returned without cudaGridDependencySynchronize in a programmatic launch "
                                 "(it may read the previous kernel's output early, and the next kernel would not "
                                 "wait for that one)");
  }
  for (auto& group : me.committed) Land(group);  // copies in flight still land
  me.committed.clear();
  Land(me.issued);
  me.done = true;
  --g.live;
  Warp& w = CurrentWarp();
  --g.block_barrier.members;
  --w.barrier.members;
  if (g.block_barrier.arrived > 0 && g.block_barrier.arrived >= g.block_barrier.members) {
    Report(Severity::kWarning, InKernel() + "__syncthreads completed by threads exiting (non-uniform return)");
    Release(g.block_barrier, g.block_barrier.arrived);
  }
  if (w.barrier.arrived > 0 && w.barrier.arrived >= w.barrier.members) {
    Report(Severity::kError, InKernel() + "warp collective completed by lanes exiting (divergent warp operation)");
    Release(w.barrier, w.barrier.arrived);
  }
  void* unused;
  if (g.live == 0) emu_fiber_switch(&unused, g.launcher_sp);
  if (g.waiting >= g.live) Deadlock("thread exit");
  const int next = NextThread();
  g.current = next;
  thread_idx = {static_cast<unsigned>(next), 0, 0};
  emu_fiber_switch(&unused, g.fibers[next].sp);
  std::abort();  // an exited fiber is never resumed
}

void MakeOrder(unsigned threads) {
  g.order.resize(threads);
  g.rank.resize(threads);
  for (unsigned i = 0; i < threads; ++i) g.order[i] = g.order_mode == Order::kReverse ? threads - 1 - i : i;
  if (g.order_mode == Order::kRandom) {
    for (unsigned i = threads - 1; i > 0; --i) std::swap(g.order[i], g.order[NextRandom() % (i + 1)]);
  }
  for (unsigned i = 0; i < threads; ++i) g.rank[g.order[i]] = static_cast<int>(i);
}

}  // namespace

const char* CurrentKernel() { return g.kernel; }
void SetCurrentKernel(const char* name) { g.kernel = name; }
Order ScheduleOrder() {
  Initialise();
  return g.order_mode;
}
void SetScheduleOrder(Order order) {
  Initialise();
  g.order_mode = order;
}
uint64_t NextRandom() {  // 64-bit LCG; the high bits are used
  g.random_state = g.random_state * 6364136223846793005ull + 1442695040888963407ull;
  return g.random_state >> 33;
}

void RunBlock(const std::function<void()>& body, unsigned threads, size_t smem, bool programmatic) {
  Initialise();
  g.programmatic = programmatic;
  g.warps.assign((threads + 31) / 32, Warp{});
  for (unsigned w = 0; w < g.warps.size(); ++w) {
    g.warps[w].lanes = static_cast<int>(std::min(32u, threads - 32 * w));
    g.warps[w].barrier.members = g.warps[w].lanes;
  }
  g.block_barrier = Barrier{};
  g.block_barrier.members = static_cast<int>(threads);
  const size_t used = (smem + 15) / 16 * 16;  // 16-byte aligned, as CUDA guarantees
  g.dynamic_smem = g.smem_end - used;
  std::memset(g.dynamic_smem, 0xFF, used);
  g.body = &body;
  for (unsigned i = 0; i < threads; ++i) {
    Fiber& f = g.fibers[i];
    f.done = false;
    f.grid_waited = false;
    f.issued.clear();
    f.committed.clear();
    // Initial stack, as emu_fiber_switch pops it: six callee-saved registers,
    // then FiberMain as the return address, entered with the stack aligned as
    // after a call (a dummy return address above it).
    auto** sp = reinterpret_cast<void**>((reinterpret_cast<uintptr_t>(f.stack) + kStackBytes) & ~uintptr_t{15});
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(&FiberMain);
    for (int r = 0; r < 6; ++r) *--sp = nullptr;
    f.sp = sp;
  }
  g.live = static_cast<int>(threads);
  g.waiting = 0;
  MakeOrder(threads);
  g.current = g.order[0];
  thread_idx = {static_cast<unsigned>(g.current), 0, 0};
  emu_fiber_switch(&g.launcher_sp, g.fibers[g.current].sp);  // back here when every thread exited
}

}  // namespace emu::internal

// ---- the device-side entry points of emu_device.h ---------------------------------------
namespace emu {
using namespace internal;

void SyncThreads() { Wait(g.block_barrier, "__syncthreads"); }
void SyncWarp() { Wait(CurrentWarp().barrier, "__syncwarp"); }

uint64_t WarpExchange(uint64_t value, int src_lane) {
  Warp& w = CurrentWarp();
  RequireWholeWarp(w, "warp shuffle");
  w.slots[thread_idx.x % 32] = value;
  Wait(w.barrier, "warp shuffle");  // every lane has written its slot
  const uint64_t r = w.slots[src_lane & 31];
  Wait(w.barrier, "warp shuffle");  // every lane has read before a slot is reused
  return r;
}

void WarpGather(uint64_t value, uint64_t* all32) {
  Warp& w = CurrentWarp();
  RequireWholeWarp(w, "warp vote");
  w.slots[thread_idx.x % 32] = value;
  Wait(w.barrier, "warp vote");
  std::memcpy(all32, w.slots, sizeof(w.slots));
  Wait(w.barrier, "warp vote");
}

void WarpShare(const void* mine, size_t bytes, void* all) {
  Warp& w = CurrentWarp();
  RequireWholeWarp(w, "warp share");
  if (w.share.size() < 32 * bytes) w.share.resize(32 * bytes);
  std::memcpy(w.share.data() + (thread_idx.x % 32) * bytes, mine, bytes);
  Wait(w.barrier, "warp share");  // every lane has written its bytes
  std::memcpy(all, w.share.data(), 32 * bytes);
  Wait(w.barrier, "warp share");  // every lane has read before the buffer is reused
}

void KernelError(const char* what) { Report(Severity::kError, InKernel() + what); }

void RequireFullMask(unsigned mask, const char* what) {
  if (mask == 0xffffffffu) return;
  std::fprintf(stderr, "EMU FATAL: %s%s with a partial mask: not emulated\n", InKernel().c_str(), what);
  std::abort();
}

void* DynamicSharedMemory() { return g.dynamic_smem; }

void GridDependencySynchronize() { g.fibers[g.current].grid_waited = true; }
// Lets the next kernel launch early on a GPU; here kernels run one after
// another, so there is nothing to model (calling it before the wait is legal).
void TriggerProgrammaticLaunchCompletion() {}

void PipelineCopy(void* dst, const void* src, size_t bytes) {
  if (bytes != 4 && bytes != 8 && bytes != 16) Report(Severity::kError, InKernel() + "cp.async size not 4, 8 or 16");
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 || reinterpret_cast<uintptr_t>(src) % bytes != 0) {
    Report(Severity::kError, InKernel() + "cp.async address not aligned to its size");
  }
  if (!IsDeviceRange(src, bytes)) Report(Severity::kError, InKernel() + "cp.async source not in device memory");
  char* d = static_cast<char*>(dst);
  if (d < g.dynamic_smem || d + bytes > g.smem_end) {
    Report(Severity::kError, InKernel() + "cp.async destination outside the block's dynamic shared memory");
    return;
  }
  if (!g.lazy_pipeline) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::memset(dst, 0xFF, bytes);  // undefined until the wait: reads before it see NaN
  g.fibers[g.current].issued.push_back({dst, src, bytes});
}

void PipelineCommit() {
  Fiber& f = g.fibers[g.current];
  f.committed.push_back(std::move(f.issued));
  f.issued.clear();
}

void PipelineWaitPrior(int groups_in_flight) {
  Fiber& f = g.fibers[g.current];
  while (static_cast<int>(f.committed.size()) > groups_in_flight) {
    Land(f.committed.front());
    f.committed.pop_front();
  }
}

}  // namespace emu
