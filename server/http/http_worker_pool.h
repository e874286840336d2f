// Internal to the HTTP server (http_server.h): the pool of threads that run
// route handlers, which may block. Not for other modules.
#ifndef BEACON_SERVER_HTTP_HTTP_WORKER_POOL_H_
#define BEACON_SERVER_HTTP_HTTP_WORKER_POOL_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "util/mutex.h"

namespace beacon::http_internal {

// Runs tasks on threads that may block. Grows to the number of tasks running
// at once; the HTTP server submits at most one handler per connection, so the
// pool never holds more threads than connections (max_connections +
// probe_connections). After a burst it shrinks again: a thread idle for
// `idle_timeout` exits while more than `min_threads` are alive, so that a
// burst of 200 concurrent requests does not pin 200 thread stacks and their
// malloc arenas for the life of the process. When a shrink brings the pool
// back to `min_threads`, the last thread to exit calls malloc_trim(0) (glibc)
// so the freed handler memory goes back to the OS instead of staying at the
// burst's high-water mark.
//
// An exited thread is joined by the next Submit() or StopAndJoin(): no thread
// is detached and none is destroyed joinable. StopAndJoin() runs the tasks
// already queued first. Thread-safe.
class WorkerPool {
 public:
  static constexpr std::chrono::milliseconds kDefaultIdleTimeout{30000};
  static constexpr size_t kDefaultMinThreads = 2;

  // REQUIRES: idle_timeout > 0.
  explicit WorkerPool(std::chrono::milliseconds idle_timeout = kDefaultIdleTimeout,
                      size_t min_threads = kDefaultMinThreads);
  ~WorkerPool();  // StopAndJoin()s

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False once stopping; the task is then not run. May be called from a task.
  bool Submit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  // Idempotent. REQUIRES: not called from a task.
  void StopAndJoin() ABSL_LOCKS_EXCLUDED(mu_);

  // Threads alive and not exiting (running a task or waiting for one).
  size_t threads() const ABSL_LOCKS_EXCLUDED(mu_);
  // Idle timeouts that have expired so far (a thread retired, or stayed as
  // one of the min_threads): lets a test wait for the reaping to have run.
  size_t idle_expiries() const ABSL_LOCKS_EXCLUDED(mu_);
  // Tasks running or queued: 0 once every handler has returned.
  size_t busy() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the thread objects of exited threads out, for joining outside mu_.
  std::vector<std::thread> TakeRetiredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::chrono::milliseconds idle_timeout_;
  const size_t min_threads_;
  mutable Mutex mu_;
  CondVar cv_;  // signalled for a queued task (one idle thread) and on stop (all)
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for a task
  size_t idle_expiries_ ABSL_GUARDED_BY(mu_) = 0;
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;  // threads not exiting
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unordered_map<std::thread::id, std::thread> all_ ABSL_GUARDED_BY(mu_);  // not yet joined
  std::vector<std::thread::id> retired_ ABSL_GUARDED_BY(mu_);                  // exited, to join
};

}  // namespace beacon::http_internal

#endif  // BEACON_SERVER_HTTP_HTTP_WORKER_POOL_H_
