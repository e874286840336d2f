#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace beacon {
namespace {
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
// Spin iterations before a worker sleeps (a few hundred microseconds with
// PAUSE): longer than the gap between two kernels of one step.
constexpr int kSpinIterations = 4000;
inline uint64_t GenOf(uint64_t state) { return state >> 32; }
inline uint64_t IndexOf(uint64_t state) { return state & 0xffffffffu; }
}  // namespace

int AvailableCpus() {
  // The CPUs this process may run on (taskset, a container's cpuset)...
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // ...and no more than a cgroup v2 CPU quota allows (a Kubernetes CPU
  // limit): "max 100000" means none, "150000 100000" one and a half CPUs.
  std::ifstream quota("/sys/fs/cgroup/cpu.max");
  std::string max_str;
  int64_t period = 0;
  if (quota >> max_str >> period && max_str != "max" && period > 0) {
    const int64_t max_us = std::atoll(max_str.c_str());
    if (max_us > 0) n = std::min<int>(n, std::max<int64_t>(1, (max_us + period - 1) / period));
  }
  return n;
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = AvailableCpus();
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(uint64_t gen, int index) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (GenOf(s) != gen) return;
    const Job& job = jobs_[gen & 1];
    const int64_t chunk = static_cast<int64_t>(IndexOf(s));
    if (chunk >= job.n_chunks.load(std::memory_order_relaxed)) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const int64_t begin = chunk * job.grain;
    (*job.fn)(begin, std::min(job.n, begin + job.grain), index);
    done_.fetch_add(1, std::memory_order_release);
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t last_gen = 0;
  for (;;) {
    int spin = 0;
    uint64_t gen = GenOf(state_.load(std::memory_order_acquire));
    while (gen == last_gen && !stop_.load(std::memory_order_relaxed)) {
      if (++spin < kSpinIterations) {
        CpuRelax();
      } else {
        const uint32_t w = wake_.load(std::memory_order_acquire);
        sleepers_.fetch_add(1);
        // Re-check after announcing ourselves: the caller bumps wake_ only
        // when it sees a sleeper, after publishing the new state.
        if (GenOf(state_.load(std::memory_order_acquire)) == last_gen && !stop_.load()) wake_.wait(w);
        sleepers_.fetch_sub(1);
        spin = 0;
      }
      gen = GenOf(state_.load(std::memory_order_acquire));
    }
    if (stop_.load()) return;
    RunChunks(gen, index);
    last_gen = gen;
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    fn(0, n, 0);
    return;
  }
  const uint64_t gen = ++gen_;
  Job& job = jobs_[gen & 1];
  job.fn = &fn;
  job.n = n;
  job.grain = grain;
  const int64_t n_chunks = (n + grain - 1) / grain;
  job.n_chunks.store(n_chunks, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  state_.store(gen << 32, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
  }
  RunChunks(gen, 0);
  // Every chunk is claimed; wait for the ones other threads are running.
  int spin = 0;
  while (done_.load(std::memory_order_acquire) != n_chunks) {
    if (++spin < 1000) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace beacon
