// util/signal_watch.h: a blocked signal reaches the watch's callback while it
// lives, and one sent after it is gone stays pending for the owner's own
// sigwait (nothing lost between the two).
#include "util/signal_watch.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace beacon {
namespace {

TEST(SignalWatchTest, TakesBlockedSignalsWhileItLivesAndLeavesLaterOnesPending) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  sigset_t old;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);  // the watch's thread inherits the mask
  std::atomic<int> got{0};
  {
    SignalWatch watch(set, [&got](int sig) { got.store(sig); });
    ASSERT_EQ(kill(getpid(), SIGUSR2), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(got.load(), SIGUSR2);
  }
  got.store(0);
  ASSERT_EQ(kill(getpid(), SIGUSR2), 0);  // no watch now: pending, not taken
  const timespec wait{5, 0};
  EXPECT_EQ(sigtimedwait(&set, nullptr, &wait), SIGUSR2);
  EXPECT_EQ(got.load(), 0);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace
}  // namespace beacon
