#include "server/grpc/prep_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "util/mutex.h"

namespace beacon {
namespace {

// A full queue refuses at once (the caller answers RESOURCE_EXHAUSTED);
// once the threads take tasks, it accepts again.
TEST(PrepPoolTest, RefusesPastItsQueueAndAcceptsAgain) {
  Notification release;
  std::atomic<int> ran{0};
  PrepPool pool(1, 2);
  auto blocked = [&] {
    release.WaitForNotificationWithTimeout(absl::Seconds(10));
    ran.fetch_add(1);
  };
  ASSERT_TRUE(pool.TrySubmit(blocked));  // the thread takes it and blocks
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.queued() != 0 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
  ASSERT_EQ(pool.queued(), 0u);
  EXPECT_TRUE(pool.TrySubmit(blocked));
  EXPECT_TRUE(pool.TrySubmit(blocked));
  EXPECT_FALSE(pool.TrySubmit([&] { ran.fetch_add(100); }));  // two wait already
  EXPECT_EQ(pool.queued(), 2u);
  release.Notify();
  while (ran.load() < 3 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
  EXPECT_EQ(ran.load(), 3);
  EXPECT_TRUE(pool.TrySubmit([&] { ran.fetch_add(1); }));
}

// Destruction runs what is queued (each task ends a gRPC call) and joins.
TEST(PrepPoolTest, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    PrepPool pool(2, 64);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(pool.TrySubmit([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ran.fetch_add(1);
      }));
    }
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace beacon
