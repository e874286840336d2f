#include "server/ops/process_guards.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace beacon {
namespace {

TEST(RaiseOpenFileLimitTest, SoftLimitReachesTheHardLimit) {
  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original), 0);
  if (original.rlim_max < 64) GTEST_SKIP() << "hard limit too low to lower the soft one";
  rlimit lowered = original;
  lowered.rlim_cur = 32;  // as a service manager might start us
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);

  absl::StatusOr<OpenFileLimit> got = RaiseOpenFileLimit();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->before, 32u);
  EXPECT_EQ(got->soft, original.rlim_max);
  EXPECT_EQ(got->hard, original.rlim_max);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, original.rlim_max);

  // Already at the hard limit: nothing to do, still OK.
  got = RaiseOpenFileLimit();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->before, got->soft);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &original), 0);
}

TEST(LogRateLimiterTest, BurstPerWindowThenCountsWhatItDropped) {
  LogRateLimiter limiter(/*burst=*/3, /*window_s=*/10);
  int printed = 0;
  for (int i = 0; i < 100; ++i) {
    if (!limiter.Line("libprotobuf ERROR", "bad utf-8", false, 1.0 + i * 0.01).empty()) ++printed;
  }
  EXPECT_EQ(printed, 3);
  // The next window prints again and reports the suppressed count once.
  EXPECT_EQ(limiter.Line("libprotobuf ERROR", "bad utf-8", false, 12.0),
            "[libprotobuf ERROR] bad utf-8 (97 similar lines suppressed)");
  EXPECT_EQ(limiter.Line("libprotobuf ERROR", "bad utf-8", false, 12.1), "[libprotobuf ERROR] bad utf-8");
  // A fatal line always passes, even in a full window.
  EXPECT_FALSE(limiter.Line("libprotobuf ERROR", "bad utf-8", false, 12.2).empty());
  EXPECT_TRUE(limiter.Line("libprotobuf ERROR", "bad utf-8", false, 12.3).empty());
  EXPECT_EQ(limiter.Line("libprotobuf FATAL", "abort", true, 12.4),
            "[libprotobuf FATAL] abort (1 similar lines suppressed)");
}

}  // namespace
}  // namespace beacon
