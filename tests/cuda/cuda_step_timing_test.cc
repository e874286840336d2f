// CudaBackend::TimeSteps (issue 44): the device time of each step, from an
// event before its uploads to one after its read-back, for beacon-bench's
// "device ms" beside the wall time. Counts only steps that ran; off stops
// counting; turning it on again starts from zero.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "gtest/gtest.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using backend_test::MakeRuntime;

TEST(CudaStepTimingTest, CountsTheStepsThatRanAndStopsWhenOff) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const std::string model = std::string("dummy:") + BEACON_SOURCE_DIR + "/tests/data/tiny-qwen3.json";
  std::unique_ptr<Runtime> rt = MakeRuntime(model, "cuda");
  ASSERT_NE(rt, nullptr);
  auto* cuda = dynamic_cast<CudaBackend*>(rt->backend());
  ASSERT_NE(cuda, nullptr);
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(256);
  SequenceKv seq(cache.get());
  std::vector<int32_t> ids;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  ForwardEntry e{&seq, prompt, 0, false};
  ASSERT_TRUE(cuda->ForwardGreedy(std::span(&e, 1), &ids).ok());
  EXPECT_EQ(cuda->timed_steps(), 0) << "off by default";

  ASSERT_TRUE(cuda->TimeSteps(true).ok());
  int32_t pos = 5;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> next = {ids[0]};
    ForwardEntry d{&seq, next, pos++, false};
    ASSERT_TRUE(cuda->ForwardGreedy(std::span(&d, 1), &ids).ok());
  }
  // A refused step (a token id past the vocabulary) runs nothing and is not counted.
  const std::vector<int32_t> bad = {rt->config().vocab_size + 7};
  ForwardEntry b{&seq, bad, pos, false};
  EXPECT_FALSE(cuda->ForwardGreedy(std::span(&b, 1), &ids).ok());
  EXPECT_EQ(cuda->timed_steps(), 3);
  EXPECT_GE(cuda->device_ms_total(), 0.0);  // the emulator's events measure 0; a GPU's more

  ASSERT_TRUE(cuda->TimeSteps(false).ok());
  const std::vector<int32_t> next = {ids[0]};
  ForwardEntry d{&seq, next, pos, false};
  ASSERT_TRUE(cuda->ForwardGreedy(std::span(&d, 1), &ids).ok());
  EXPECT_EQ(cuda->timed_steps(), 3) << "no counting once off";
  ASSERT_TRUE(cuda->TimeSteps(true).ok());
  EXPECT_EQ(cuda->timed_steps(), 0);
  EXPECT_EQ(cuda->device_ms_total(), 0.0);
  seq.Release();
}

}  // namespace
}  // namespace beacon
