// A small fork-join pool for the CPU kernels: ParallelFor splits a range into
// chunks that the calling thread and the workers claim dynamically, and
// returns when every chunk is done.
//
// Built for many short parallel regions per step (hundreds per decode step)
// on machines that may be shared: the caller never waits for a worker that
// has not started (it claims the chunks itself), only for chunks already
// being run. Workers spin briefly before sleeping, so waking them is cheap.
// Thread ownership: one caller at a time (the engine thread); not reentrant.
#ifndef BEACON_KERNELS_CPU_THREAD_POOL_H_
#define BEACON_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace beacon {

// CPUs this process may use: its affinity mask (taskset, a container's
// cpuset), capped by a cgroup v2 CPU quota (a Kubernetes CPU limit), so
// that "all threads" never oversubscribes a container.
int AvailableCpus();

class ThreadPool {
 public:
  // `n_threads` counts the caller: 1 means no worker threads at all.
  // 0 picks AvailableCpus().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) in chunks of `grain`
  // items; thread_index is in [0, n_threads()) and unique among concurrent
  // calls, so it can index per-thread scratch.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  // A job's parameters, double-buffered by generation parity: a worker that
  // read the state of generation g and then claims a chunk by CAS knows the
  // slot was not rewritten (that needs generation g + 2 to be published), so
  // fn, n and grain, read after the CAS, are plain fields. n_chunks is read
  // before the CAS, when the slot may already be rewritten for g + 2 (the CAS
  // then fails and the value is dropped): an atomic, so that read is not a
  // data race (ThreadSanitizer found it); relaxed, as state_ orders it.
  struct Job {
    const std::function<void(int64_t, int64_t, int)>* fn = nullptr;
    int64_t n = 0;
    int64_t grain = 1;
    std::atomic<int64_t> n_chunks{0};
  };

  void WorkerLoop(int index);
  // Claims and runs chunks of the job published in state_ as generation
  // `gen`, until none is left or the generation changes.
  void RunChunks(uint64_t gen, int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  Job jobs_[2];
  uint64_t gen_ = 0;                // caller-side generation counter
  std::atomic<uint64_t> state_{0};  // generation << 32 | next chunk index
  std::atomic<int64_t> done_{0};    // chunks finished in the current job
  std::atomic<uint32_t> wake_{0};   // bumped to wake sleeping workers
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_THREAD_POOL_H_
