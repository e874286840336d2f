// Sample groups on the CUDA backend: a sequence that starts on another's
// prompt blocks by reference (KvCacheManager::Adopt for a sample group's
// member, the n > 1 path of engine/serving/generation_engine.h) attends over those shared device blocks and
// generates what it generates alone, token for token; the donor is unharmed
// and the pool holds the shared blocks once. Skips without a GPU; runs under
// the CUDA emulator. Model: tests/data/tiny-r1-qwen2.json dummy weights with
// R1-Distill's real vocabulary.
#include <memory>
#include <string>
#include <vector>

#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "kv/serving/kv_cache_manager.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

TEST(CudaSharedPrefixTest, ASampleOnSharedPromptBlocksGeneratesWhatItDoesAlone) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Runtime> rt = backend_test::MakeTinyR1Runtime("cuda");
  ASSERT_NE(rt, nullptr);
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(512);
  const int32_t bs = cache->shape().block_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 3 * bs + 5; ++i) prompt.push_back(1000 + (i * 53) % 20000);
  GenerationOptions o;
  o.max_tokens = 6;
  o.ignore_eos = true;
  o.sampling.temperature = 1.0f;
  const auto make = [&](uint64_t seed) {
    GenerationOptions s = o;
    s.sampling.seed = seed;
    return std::move(*Generation::Create(rt->tokenizer(), cache.get(), rt->config(), prompt, s));
  };
  // Alone: the second sample's tokens with its seed.
  std::unique_ptr<Generation> alone = make(8);
  Generation* one[] = {alone.get()};
  const std::vector<int32_t> want = backend_test::TokensOf(rt->backend(), one, 0);
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(cache->pool().num_used(), 0);

  // Sample 0 runs the prompt; sample 1 takes its whole blocks and runs the rest.
  KvCacheManager kvm(cache.get());
  const auto make_on = [&](KvSeqId id, uint64_t seed) {
    KvSeqSpec spec;
    spec.prompt_len = static_cast<int32_t>(prompt.size());
    spec.group = 1;  // sample 0's id
    EXPECT_TRUE(kvm.Add(id, spec).ok());
    GenerationOptions s = o;
    s.sampling.seed = seed;
    return std::move(*Generation::CreateOn(rt->tokenizer(), kvm.kv(id), rt->config(), prompt, s));
  };
  std::unique_ptr<Generation> donor = make_on(1, 7), member = make_on(2, 8);
  EXPECT_TRUE(kvm.Probe(2).wait);  // sample 0 has not run the prompt
  Generation* first[] = {donor.get()};
  ASSERT_TRUE(RunStep(rt->backend(), first, {}, nullptr).ok());  // the whole prompt in one step
  ASSERT_FALSE(donor->prefilling());
  kvm.OnRan(1, donor->prefill_done(), donor->prefilling());
  ASSERT_EQ(kvm.Probe(2).blocks, 3);
  const int32_t before = cache->pool().num_used();
  ASSERT_EQ(kvm.Adopt(2, static_cast<int32_t>(prompt.size())), 3 * bs);
  member->OnPrefixAdopted();
  EXPECT_EQ(cache->pool().num_used(), before);  // nothing copied
  Generation* both[] = {donor.get(), member.get()};
  EXPECT_EQ(backend_test::TokensOf(rt->backend(), both, 1), want);
  EXPECT_EQ(cache->pool().num_used(), 0);
}

}  // namespace
}  // namespace beacon
