// A small fork-join pool for the CPU kernels: ParallelFor splits a range over
// the pool's threads and the calling thread, and returns when all are done.
//
// Built for many short parallel regions per step (hundreds per decode step):
// workers spin briefly before sleeping, so waking them costs microseconds.
// Thread ownership: one caller at a time (the engine thread); ParallelFor is
// not reentrant.
#ifndef BEACON_KERNELS_CPU_THREAD_POOL_H_
#define BEACON_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace beacon {

class ThreadPool {
 public:
  // `n_threads` counts the caller: 1 means no worker threads at all.
  // 0 picks std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) in chunks of `grain`
  // items, handed out dynamically; thread_index is in [0, n_threads()).
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void WorkerLoop(int index);
  void RunChunks(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; written by the caller before bumping generation_.
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_THREAD_POOL_H_
