// Watches the engine thread's steps from a thread of its own (issue 46): a
// step that runs past its timeout is reported once, while it still runs.
// The engine thread cannot report a step that never returns (a device that
// stopped answering, a kernel that spins), and without this a replica with
// a hung engine stays ready in name, its /health answering, its requests
// waiting for ever.
//
// The watchdog only tells: it cannot stop the step. EngineLoop marks the
// engine broken, as it does after failed steps, and beacon-serve exits
// without joining the hung thread.
//
// Thread ownership: BeginStep/EndStep on the engine thread; running() and
// stuck() from any thread; `on_stuck` runs on the watchdog's thread.
#ifndef BEACON_ENGINE_SERVING_STEP_WATCHDOG_H_
#define BEACON_ENGINE_SERVING_STEP_WATCHDOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "util/mutex.h"

namespace beacon {

class StepWatchdog {
 public:
  // Starts the watching thread when `timeout` > 0; with 0 it only times
  // steps (running()), and never calls `on_stuck`. `on_stuck` gets how long
  // the step had run when it was caught, at most once per step.
  StepWatchdog(absl::Duration timeout, std::function<void(absl::Duration running)> on_stuck);
  // Stops and joins the watching thread (never the engine thread).
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  void BeginStep();
  void EndStep();
  // How long the step in progress has run; zero between steps.
  absl::Duration running() const;
  // The step in progress has passed the timeout and not returned.
  bool stuck() const { return stuck_.load(); }
  absl::Duration timeout() const { return timeout_; }

 private:
  void Watch() ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration timeout_;
  const std::function<void(absl::Duration)> on_stuck_;
  // Start of the step in progress (absl::GetCurrentTimeNanos), 0 between
  // steps; a step's serial number, so that one step is reported once.
  std::atomic<int64_t> step_start_ns_{0};
  std::atomic<uint64_t> step_serial_{0};
  std::atomic<bool> stuck_{false};
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_STEP_WATCHDOG_H_
