// The prefix cache on the CUDA backend: device KV pages follow the host
// pool's block ids, so a sequence that starts on blocks another sequence
// computed and the KV cache manager indexed (kv/serving/kv_cache_manager.h, the
// serving path's sharing) attends over those device blocks
// and writes, token for token, what it writes running its whole prompt,
// under `full` and under BeaconKV evicting on the device (keep_prompt: the
// shared blocks are never compacted). Skips without a GPU; runs under the
// CUDA emulator. Model: tests/data/tiny-r1-qwen2.json dummy weights with
// R1-Distill's real vocabulary.
#include <memory>
#include <string>
#include <vector>

#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "kv/serving/kv_cache_manager.h"
#include "kv/serving/prefix_cache.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

TEST(CudaPrefixCacheTest, ASequenceOnCachedDeviceBlocksWritesWhatItWritesAlone) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Runtime> rt = backend_test::MakeTinyR1Runtime("cuda");
  ASSERT_NE(rt, nullptr);
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(1024);
  const int32_t bs = cache->shape().block_size;
  auto prompt = [&](int question) {
    std::vector<int32_t> p;
    for (int i = 0; i < 3 * bs + 4; ++i) p.push_back(1000 + (i * 53) % 20000);  // the shared prefix
    for (int i = 0; i < 6; ++i) p.push_back(22000 + question * 31 + i);
    return p;
  };
  KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  beacon.keep_prompt = true;
  beacon.budget = 16;
  beacon.interval = 8;
  beacon.window = 8;
  for (const KvPolicyOptions& kv : {KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), beacon}) {
    SCOPED_TRACE(std::string(kv.policy_name()));
    ASSERT_TRUE(PrefixShareable(kv));
    GenerationOptions o;
    o.max_tokens = 40;  // beacon evicts 16 + 8 tokens in, and then every 8
    o.ignore_eos = true;
    o.sampling.temperature = 0.0f;
    o.kv = kv;
    const auto make = [&](int question) {
      return std::move(*Generation::Create(rt->tokenizer(), cache.get(), rt->config(), prompt(question), o));
    };
    KvCacheManager kvm(cache.get());
    kvm.EnablePrefixCache(1);
    const auto make_on = [&](KvSeqId id, int question) {
      KvSeqSpec spec;
      spec.prompt = prompt(question);
      spec.prompt_len = static_cast<int32_t>(spec.prompt.size());
      spec.kv = kv;
      EXPECT_TRUE(kvm.Add(id, spec).ok());
      return std::move(*Generation::CreateOn(rt->tokenizer(), kvm.kv(id), rt->config(), prompt(question), o));
    };
    // Alone, cache off: question 1's tokens.
    std::unique_ptr<Generation> alone = make(1);
    Generation* one[] = {alone.get()};
    const std::vector<int32_t> want = backend_test::TokensOf(rt->backend(), one, 0);
    ASSERT_EQ(want.size(), 40u);
    alone.reset();
    ASSERT_EQ(cache->pool().num_used(), 0);

    // Question 0 runs its prompt; the manager indexes its full prompt blocks.
    std::unique_ptr<Generation> first = make_on(1, 0), second = make_on(2, 1);
    Generation* just_first[] = {first.get()};
    ASSERT_TRUE(RunStep(rt->backend(), just_first, {}, nullptr).ok());  // the whole prompt in one step
    kvm.OnRan(1, first->prefill_done(), first->prefilling());
    ASSERT_EQ(kvm.prefix_cache()->num_blocks(), 3);
    // Question 1 takes the three blocks of the prefix and runs the rest.
    ASSERT_EQ(kvm.Probe(2).blocks, 3);
    const int32_t before = cache->pool().num_used();
    ASSERT_EQ(kvm.Adopt(2, static_cast<int32_t>(second->prompt().size())), 3 * bs);
    second->OnPrefixAdopted();
    EXPECT_EQ(cache->pool().num_used(), before);  // nothing copied
    Generation* both[] = {first.get(), second.get()};
    EXPECT_EQ(backend_test::TokensOf(rt->backend(), both, 1), want);
    if (kv.compresses()) {
      EXPECT_GT(second->compressor()->evictions(), 0);
    }
    first.reset();
    second.reset();
    EXPECT_EQ(cache->pool().num_used(), 0);
    EXPECT_EQ(cache->pool().num_idle(), 3);
  }
}

}  // namespace
}  // namespace beacon
