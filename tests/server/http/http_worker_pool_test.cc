// WorkerPool (http_worker_pool.h): grows to the tasks running at once,
// shrinks back to its minimum after a burst, joins every thread it retires.
#include "server/http/http_worker_pool.h"

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "tests/server/http/http_test_client.h"

namespace beacon {
namespace {

using namespace std::chrono_literals;
using test::WaitOrDie;

TEST(WorkerPoolTest, ShrinksToItsMinimumAfterABurstAndJoinsWhatExits) {
  constexpr int kBurst = 20;
  http_internal::WorkerPool pool(100ms, /*min_threads=*/2);
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  for (int i = 0; i < kBurst; ++i) {  // all must block at once: kBurst threads
    ASSERT_TRUE(pool.Submit([&] {
      std::unique_lock<std::mutex> lock(mu);
      ++arrived;
      cv.notify_all();
      cv.wait_for(lock, 20s, [&] { return arrived >= kBurst; });
    }));
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return arrived >= kBurst; }));
  }
  EXPECT_EQ(pool.threads(), static_cast<size_t>(kBurst));
  for (int i = 0; i < 2000 && pool.threads() > 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(pool.threads(), 2u);
  std::promise<void> ran;  // still serves; joins the exited threads on the way
  ASSERT_TRUE(pool.Submit([&] { ran.set_value(); }));
  auto done = ran.get_future();
  WaitOrDie(done, "a task after the pool shrank");
  // Several idle timeouts pass (counted, not slept for: with no reaping the
  // wait fails), and the minimum stays.
  const size_t expiries = pool.idle_expiries();
  for (int i = 0; i < 2000 && pool.idle_expiries() < expiries + 4; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(pool.idle_expiries(), expiries + 4) << "the idle timeouts never expired";
  EXPECT_EQ(pool.threads(), 2u);
  pool.StopAndJoin();
  EXPECT_EQ(pool.threads(), 0u);
  EXPECT_FALSE(pool.Submit([] {}));
}

}  // namespace
}  // namespace beacon
