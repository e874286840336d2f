// beacon::Mutex, MutexLock, CondVar and Notification: the part of
// absl::Mutex's (and absl::Notification's) interface the server and its tests
// use, with Abseil's thread-safety attributes, over std::mutex and
// std::condition_variable.
//
// Why not absl::Mutex itself: Debian's Abseil is not built with
// ThreadSanitizer, so TSan cannot see absl::Mutex lock and unlock (its own
// atomics and futex calls inside libabsl_synchronization) and reports every
// access the mutex guards as a race. std::mutex goes through pthread, which
// TSan intercepts. The attributes (ABSL_LOCKABLE, ABSL_GUARDED_BY on the
// fields it guards) keep clang's -Wthread-safety analysis, which std::mutex
// alone does not get from libstdc++.
#ifndef BEACON_UTIL_MUTEX_H_
#define BEACON_UTIL_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace beacon {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// std::recursive_mutex with the same attributes, for the one place a lock is
// re-entered at run time (server/grpc/grpc_service.cc: a write issued under it
// can complete inline and lock it again). The analysis does not model
// re-entry; code must not lock it twice in one function itself.
class ABSL_LOCKABLE RecursiveMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::recursive_mutex mu_;
};

// Holds `mu` for its scope: MutexLock, RecursiveLock.
template <typename M>
class ABSL_SCOPED_LOCKABLE ScopedLock {
 public:
  explicit ScopedLock(M* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~ScopedLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  M* const mu_;
};
using MutexLock = ScopedLock<Mutex>;
using RecursiveLock = ScopedLock<RecursiveMutex>;

// As absl::CondVar: waits release `mu` and hold it again on return; wake-ups
// may be spurious, so callers wait in a loop on their condition.
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // `mu` stays held, as the caller had it
  }
  // True when `deadline` passed (false: signalled, or a spurious wake-up).
  // Measured on the steady clock from now, so a wall-clock jump neither
  // shortens nor stretches the wait.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_for(lock, absl::ToChronoNanoseconds(left)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// As absl::Notification, which has the same blind spot under TSan (its wait
// is absl::Mutex): Notify() once, and every write before it is visible to a
// thread whose wait returned true. Tests hand results from the engine's
// thread to theirs with it.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  // False when `timeout` passed first.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (!notified_) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) return notified_;
    }
    return true;
  }

 private:
  mutable Mutex mu_;
  CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace beacon

#endif  // BEACON_UTIL_MUTEX_H_
