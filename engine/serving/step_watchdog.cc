#include "engine/serving/step_watchdog.h"

#include <algorithm>
#include <utility>

namespace beacon {

StepWatchdog::StepWatchdog(absl::Duration timeout, std::function<void(absl::Duration)> on_stuck)
    : timeout_(timeout), on_stuck_(std::move(on_stuck)) {
  if (timeout_ > absl::ZeroDuration()) thread_ = std::thread([this] { Watch(); });
}

StepWatchdog::~StepWatchdog() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void StepWatchdog::BeginStep() {
  step_serial_.fetch_add(1);
  step_start_ns_.store(absl::GetCurrentTimeNanos());
}

void StepWatchdog::EndStep() {
  step_start_ns_.store(0);
  stuck_.store(false);
}

absl::Duration StepWatchdog::running() const {
  const int64_t start = step_start_ns_.load();
  return start == 0 ? absl::ZeroDuration()
                    : absl::Nanoseconds(std::max<int64_t>(0, absl::GetCurrentTimeNanos() - start));
}

void StepWatchdog::Watch() {
  // Checked four times per timeout (at least once a second), so a stuck
  // step is caught at most a quarter of the timeout late.
  const absl::Duration period = std::min(timeout_ / 4, absl::Seconds(1));
  uint64_t reported = 0;  // the serial of the last step reported
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (!stop_) cv_.WaitWithDeadline(&mu_, absl::Now() + period);
      if (stop_) return;
    }
    const uint64_t serial = step_serial_.load();
    const absl::Duration ran = running();
    if (ran <= timeout_ || serial == reported) continue;
    reported = serial;
    stuck_.store(true);
    on_stuck_(ran);  // outside mu_: it takes the engine loop's locks
  }
}

}  // namespace beacon
