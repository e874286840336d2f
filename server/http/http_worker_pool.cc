#include "server/http/http_worker_pool.h"

#include <system_error>
#include <utility>

#include "absl/time/time.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace beacon::http_internal {

WorkerPool::WorkerPool(std::chrono::milliseconds idle_timeout, size_t min_threads)
    : idle_timeout_(idle_timeout), min_threads_(min_threads) {}

WorkerPool::~WorkerPool() { StopAndJoin(); }

bool WorkerPool::Submit(std::function<void()> task) {
  std::vector<std::thread> exited;
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    exited = TakeRetiredLocked();
    tasks_.push_back(std::move(task));
    if (tasks_.size() <= idle_) {
      cv_.Signal();
    } else {
      try {
        std::thread t([this] { Loop(); });
        all_.emplace(t.get_id(), std::move(t));
        ++live_;
      } catch (const std::system_error&) {
        // Out of threads: the task stays queued for the next thread that
        // finishes its task (or the one the next Submit starts).
      }
    }
  }
  for (auto& t : exited) t.join();  // already past their last use of mu_
  return true;
}

void WorkerPool::StopAndJoin() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, t] : all_) threads.push_back(std::move(t));
    all_.clear();
    retired_.clear();
  }
  cv_.SignalAll();
  for (auto& t : threads) t.join();
}

size_t WorkerPool::idle_expiries() const {
  MutexLock lock(&mu_);
  return idle_expiries_;
}

size_t WorkerPool::busy() const {
  MutexLock lock(&mu_);
  return live_ - idle_ + tasks_.size();
}

size_t WorkerPool::threads() const {
  MutexLock lock(&mu_);
  return live_;
}

std::vector<std::thread> WorkerPool::TakeRetiredLocked() {
  std::vector<std::thread> out;
  for (const std::thread::id id : retired_) {
    auto it = all_.find(id);
    if (it == all_.end()) continue;
    out.push_back(std::move(it->second));
    all_.erase(it);
  }
  retired_.clear();
  return out;
}

void WorkerPool::Loop() {
  mu_.Lock();
  for (;;) {
    ++idle_;
    const absl::Time until = absl::Now() + absl::FromChrono(idle_timeout_);
    while (!stopping_ && tasks_.empty()) {
      if (cv_.WaitWithDeadline(&mu_, until)) break;  // timed out
    }
    const bool woken = stopping_ || !tasks_.empty();
    --idle_;
    if (!woken) {
      ++idle_expiries_;
      if (live_ > min_threads_) break;  // idle too long: retire
      continue;
    }
    if (tasks_.empty()) {  // stopping; StopAndJoin() joins this thread
      --live_;
      mu_.Unlock();
      return;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    task = nullptr;  // its captures die outside the lock
    mu_.Lock();
  }
  --live_;
  const bool back_to_floor = live_ == min_threads_;  // only one exiting thread sees this
  mu_.Unlock();
#if defined(__GLIBC__)
  // Once per shrink: return the burst's freed heap (handler buffers, request
  // bodies, per-thread arenas) to the OS. Before publishing the exit, so that
  // the joiner (an IO thread in Submit) never waits for the trim.
  if (back_to_floor) malloc_trim(0);
#else
  (void)back_to_floor;
#endif
  MutexLock lock(&mu_);
  if (!stopping_) retired_.push_back(std::this_thread::get_id());  // else StopAndJoin() holds us
}

}  // namespace beacon::http_internal
