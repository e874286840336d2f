// Structured output on the CUDA backend: a Generation under a grammar draws
// on the device (its mask, filled before the pass, goes up with the step's
// sampling parameters and is applied by kernels/cuda/token_bitmask.h before
// the sampler), greedy and sampled, alongside an unconstrained sequence; the
// answer matches the grammar as on the CPU backend.
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/step_executor.h"
#include "gtest/gtest.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

TEST(CudaGrammarTest, ConstrainedDrawsRunOnTheDevice) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Runtime> rt = backend_test::MakeTinyR1Runtime("cuda");
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->backend()->samples_on_device());
  auto compiler = GrammarCompiler::Create(*rt->tokenizer(), rt->config().vocab_size, GrammarCompilerOptions());
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  GrammarSpec spec;
  spec.kind = GrammarKind::kRegex;
  spec.source = "(yes|no|maybe) [0-9]{2}";
  auto grammar = (*compiler)->Compile(spec);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(2048);
  const std::vector<int32_t> prompt = *rt->EncodePrompt("Is it raining?", /*chat=*/false, "");
  std::vector<std::unique_ptr<Generation>> gens;
  for (int i = 0; i < 3; ++i) {
    GenerationOptions o;
    o.max_tokens = 24;
    if (i < 2) o.grammar = *grammar;  // greedy and sampled under the grammar
    if (i == 1) o.sampling.temperature = 1.2f;
    o.sampling.seed = 3;
    auto g = Generation::Create(rt->tokenizer(), cache.get(), rt->config(), prompt, o);
    ASSERT_TRUE(g.ok()) << g.status();
    gens.push_back(std::move(*g));
  }
  StepExecutor executor(rt->backend());
  std::vector<std::string> text(3);
  int device_steps = 0, steps = 0;
  std::vector<ExecResult> results;
  while (!gens[0]->finished() || !gens[1]->finished() || !gens[2]->finished()) {
    std::vector<ExecItem> items;
    std::vector<int> which;
    for (int i = 0; i < 3; ++i) {
      if (!gens[i]->finished()) {
        items.push_back(ExecItem{gens[i].get(), 64});
        which.push_back(i);
      }
    }
    ASSERT_TRUE(executor.Run(items, &results).ok());
    ++steps;
    device_steps += executor.last_on_device() ? 1 : 0;
    for (size_t k = 0; k < results.size(); ++k) text[which[k]] += results[k].event.text;
    ASSERT_LT(steps, 100);
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(gens[i]->finish_reason(), FinishReason::kEos) << i << ": " << text[i] << " " << gens[i]->error();
    EXPECT_TRUE(std::regex_match(text[i], std::regex("(yes|no|maybe) [0-9]{2}"))) << i << ": " << text[i];
  }
  EXPECT_EQ(device_steps, steps) << "every step, constrained ones included, drew on the device";
}

}  // namespace
}  // namespace beacon
