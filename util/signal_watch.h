// SignalWatch: a thread that takes blocked signals while the main thread is
// busy with something that cannot stop to sigwait (beacon-serve loading a
// model, which takes minutes for a large one on a slow disk).
//
// Contract: the signals must be blocked in every thread (pthread_sigmask
// before any thread starts), as beacon-serve does so that its main thread can
// sigwait them once it is ready. While a SignalWatch lives, a signal of the
// set is taken by its thread and handed to on_signal, on that thread; the
// destructor stops the thread within one poll (100 ms) and joins it. A signal
// that arrives after that stays pending for the main thread's own sigwait:
// nothing is lost between the two.
//
// Why not a signal handler: the callback may log and decide (a handler may
// call only async-signal-safe functions).
#ifndef BEACON_UTIL_SIGNAL_WATCH_H_
#define BEACON_UTIL_SIGNAL_WATCH_H_

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <functional>
#include <thread>
#include <utility>

namespace beacon {

class SignalWatch {
 public:
  SignalWatch(const sigset_t& signals, std::function<void(int)> on_signal)
      : signals_(signals), on_signal_(std::move(on_signal)), thread_([this] { Run(); }) {}
  ~SignalWatch() {
    stop_.store(true);
    thread_.join();
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

 private:
  void Run() {
    const timespec poll{0, 100'000'000};
    while (!stop_.load()) {
      const int sig = sigtimedwait(&signals_, nullptr, &poll);
      if (sig > 0) on_signal_(sig);  // -1: timeout (EAGAIN) or EINTR, look at stop_ again
    }
  }

  const sigset_t signals_;
  const std::function<void(int)> on_signal_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace beacon

#endif  // BEACON_UTIL_SIGNAL_WATCH_H_
