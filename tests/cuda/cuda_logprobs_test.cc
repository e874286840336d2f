// Logprobs on the CUDA backend, end to end through Generation: a sequence
// that asks for them samples on the host from logits the device computed
// (device_samplable() is false for it), and prompt logprobs take every row
// of each prefill chunk (all_logits) from the device. Checked against the
// same generation on the CPU backend: same dummy weights (a tiny Qwen2 shape
// with R1-Distill's real 152K vocabulary, tests/data/tiny-r1-qwen2.json),
// same prompt. Skips without a GPU; runs under the CUDA emulator.
//
// Tolerance: the device keeps activations in bf16 (cuda_backend_test.cc:
// logits rows within 3e-2 relative RMS of the CPU's); through a log-softmax
// that moved log probabilities by at most 7.2e-3 nats on this model under
// the emulator (2026-12-01; the worst is printed). kLpTol = 0.05 nats; a
// misplaced row (a neighbour token's logits) or a missed normalisation is
// off by whole nats.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

constexpr double kLpTol = 0.05;

struct Out {
  bool device_samplable = false;
  std::vector<TokenEvent> events;
  std::vector<PositionLogprobs> prompt_logprobs;
};

Out Generate(Runtime* rt, const std::vector<int32_t>& prompt, const GenerationOptions& o) {
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(256);
  auto g = Generation::Create(rt->tokenizer(), cache.get(), rt->config(), prompt, o);
  EXPECT_TRUE(g.ok()) << g.status();
  Out out;
  out.device_samplable = (*g)->device_samplable();
  Generation* gens[] = {g->get()};
  BatchRunnerOptions bo;
  bo.prefill_chunk = 7;  // the prompt over several steps, each with all its rows
  EXPECT_TRUE(
      RunToCompletion(rt->backend(), gens, bo, [&](size_t, const TokenEvent& ev) { out.events.push_back(ev); }).ok());
  out.prompt_logprobs = (*g)->prompt_logprobs();
  return out;
}

TEST(CudaLogprobsTest, PromptAndSampledLogprobsMatchTheCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Runtime> cpu = backend_test::MakeTinyR1Runtime("cpu"), gpu = backend_test::MakeTinyR1Runtime("cuda");
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  const std::vector<int32_t> prompt = cpu->tokenizer()->Encode("The plan: first boil the water, then", false, false);
  ASSERT_GT(prompt.size(), 8u);
  GenerationOptions o;
  o.max_tokens = 2;
  o.ignore_eos = true;
  EXPECT_TRUE(Generate(gpu.get(), prompt, o).device_samplable) << "a plain greedy sequence draws on the device";
  o.logprobs = 4;
  o.prompt_logprobs = 2;
  const Out c = Generate(cpu.get(), prompt, o);
  const Out g = Generate(gpu.get(), prompt, o);
  EXPECT_FALSE(g.device_samplable) << "logprobs need the logits on the host";
  ASSERT_EQ(c.prompt_logprobs.size(), prompt.size() - 1);
  ASSERT_EQ(g.prompt_logprobs.size(), prompt.size() - 1);
  double worst = 0;
  for (size_t i = 0; i < g.prompt_logprobs.size(); ++i) {
    EXPECT_EQ(g.prompt_logprobs[i].id, prompt[i + 1]);
    const double e = std::fabs(g.prompt_logprobs[i].logprob - c.prompt_logprobs[i].logprob);
    worst = std::max(worst, e);
    EXPECT_LE(e, kLpTol) << "prompt position " << i + 1;
    ASSERT_EQ(g.prompt_logprobs[i].top.size(), 2u);
    // The most likely token's value agrees even where a near-tie swaps ids.
    EXPECT_NEAR(g.prompt_logprobs[i].top[0].logprob, c.prompt_logprobs[i].top[0].logprob, kLpTol);
  }
  ASSERT_EQ(g.events.size(), 2u);
  ASSERT_EQ(c.events.size(), 2u);
  // The first generated token follows the same prompt on both.
  ASSERT_TRUE(g.events[0].logprobs.has_value());
  EXPECT_EQ(g.events[0].logprobs->id, g.events[0].id);
  ASSERT_EQ(g.events[0].logprobs->top.size(), 4u);
  const double first = std::fabs(g.events[0].logprobs->top[0].logprob - c.events[0].logprobs->top[0].logprob);
  worst = std::max(worst, first);
  EXPECT_LE(first, kLpTol);
  std::printf("worst |cuda - cpu| logprob: %.3g nats\n", worst);
}

}  // namespace
}  // namespace beacon
