// MeasureInt8DotPeak names the instruction this build's quantised kernels
// issue, and measures a rate for it. No timing is asserted (rates belong in
// docs/performance.md): only that the measurement ran and is a finite rate.
#include "bench/int8_peak.h"

#include <cmath>

#include "gtest/gtest.h"

namespace beacon {
namespace {

TEST(Int8DotPeakTest, NamesTheBuildsInstructionAndMeasuresIt) {
  ThreadPool pool(1);
  const Int8DotPeak peak = MeasureInt8DotPeak(&pool);
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  EXPECT_EQ(peak.instruction, "vpdpbusd zmm");
#elif defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  EXPECT_EQ(peak.instruction, "vpdpbusd ymm");
#elif defined(__AVX2__)
  EXPECT_EQ(peak.instruction, "vpmaddubsw ymm");
#else
  EXPECT_EQ(peak.instruction, "none");
  EXPECT_EQ(peak.macs_per_second, 0.0);
  return;
#endif
  EXPECT_TRUE(std::isfinite(peak.macs_per_second));
  EXPECT_GT(peak.macs_per_second, 0.0);
}

TEST(Int8DotPeakTest, APoolOfTwoMeasuresTheSameInstruction) {
  // No rate is compared (a shared machine may run both threads on one
  // core): a two-thread pool claims the chunks on both threads, reports the
  // same instruction and a rate exactly when one thread does.
  ThreadPool one(1), two(2);
  const Int8DotPeak a = MeasureInt8DotPeak(&one), b = MeasureInt8DotPeak(&two);
  EXPECT_EQ(a.instruction, b.instruction);
  EXPECT_TRUE(std::isfinite(b.macs_per_second));
  EXPECT_EQ(a.macs_per_second > 0, b.macs_per_second > 0);
}

}  // namespace
}  // namespace beacon
