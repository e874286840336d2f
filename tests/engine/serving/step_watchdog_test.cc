#include "engine/serving/step_watchdog.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "util/mutex.h"

namespace beacon {
namespace {

// Waits up to 5 s for `done`.
template <typename F>
bool Eventually(F done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A step past the timeout is reported while it still runs, once, with how
// long it had run; the next step starts clean.
TEST(StepWatchdogTest, ReportsAStepPastItsTimeoutOnceWhileItRuns) {
  std::atomic<int> reports{0};
  std::atomic<int64_t> ran_ms{0};
  StepWatchdog w(absl::Milliseconds(40), [&](absl::Duration ran) {
    ran_ms.store(absl::ToInt64Milliseconds(ran));
    reports.fetch_add(1);
  });
  w.BeginStep();
  ASSERT_TRUE(Eventually([&] { return reports.load() == 1; }));
  EXPECT_TRUE(w.stuck());
  EXPECT_GE(ran_ms.load(), 40);  // past 40 ms (in whole ms)
  EXPECT_GE(w.running(), absl::Milliseconds(40));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // many more checks of the same step
  EXPECT_EQ(reports.load(), 1);
  w.EndStep();
  EXPECT_FALSE(w.stuck());
  EXPECT_EQ(w.running(), absl::ZeroDuration());
  w.BeginStep();  // another slow step: reported again
  ASSERT_TRUE(Eventually([&] { return reports.load() == 2; }));
  w.EndStep();
}

// Steps within the timeout are never reported, however many.
TEST(StepWatchdogTest, QuickStepsAreNotReported) {
  std::atomic<int> reports{0};
  StepWatchdog w(absl::Milliseconds(200), [&](absl::Duration) { reports.fetch_add(1); });
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  int steps = 0;
  while (std::chrono::steady_clock::now() < end) {
    w.BeginStep();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    w.EndStep();
    ++steps;
  }
  EXPECT_GT(steps, 10);
  EXPECT_EQ(reports.load(), 0);
  EXPECT_FALSE(w.stuck());
}

// Timeout 0: steps are timed, never reported (no watching thread).
TEST(StepWatchdogTest, ZeroTimeoutOnlyTimes) {
  StepWatchdog w(absl::ZeroDuration(), nullptr);
  w.BeginStep();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(w.running(), absl::Milliseconds(20));
  EXPECT_FALSE(w.stuck());
  w.EndStep();
}

}  // namespace
}  // namespace beacon
