// ThreadPool sizing: "all threads" means the CPUs this process may use.
#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include "gtest/gtest.h"

namespace beacon {
namespace {

TEST(AvailableCpusTest, FollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  const int all = AvailableCpus();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, CPU_COUNT(&saved));
  // Pinned to one CPU (as taskset or a one-CPU cpuset would), "all" is one.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &saved)) {
      CPU_SET(c, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(AvailableCpus(), 1);
  ThreadPool pool(0);
  EXPECT_EQ(pool.n_threads(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(AvailableCpus(), all);
}

}  // namespace
}  // namespace beacon
