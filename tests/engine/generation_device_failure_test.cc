// A device eviction that fails ends the sequence (kError, the device's
// message, KV blocks freed) instead of being logged and dropped: a cache
// that cannot shrink would outgrow what admission reserved for it.
#include <memory>
#include <vector>

#include "engine/generation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv/store/kv_cache.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class FailingDevice : public KvDeviceStorage {
 public:
  absl::Status Evict(SequenceKv*, KvPolicy*, const KvPolicyOptions&, const Protection&, int32_t, int32_t) override {
    return absl::InternalError("out of workspace");
  }
};

// A device KV cache of 64 blocks whose every eviction fails.
std::unique_ptr<KvCache> FailingCache(const ModelConfig& c) {
  auto cache =
      std::make_unique<KvCache>(KvCacheShape{c.n_layers, c.n_kv_heads, c.head_dim, 16}, 64, KvStorage::kDevice);
  cache->set_device_storage(std::make_unique<FailingDevice>());
  return cache;
}

// Streaming, prompt not kept, bound 32 slots, interval 8: the first eviction
// comes at 40 slots.
GenerationOptions StreamingBudget32() {
  GenerationOptions o;
  o.max_tokens = 200;
  o.kv = *KvPolicyOptions::DefaultsForName("streaming");
  o.kv.budget = 32;
  o.kv.interval = 8;
  o.kv.sinks = 4;
  o.kv.window = 16;
  o.kv.keep_prompt = false;
  return o;
}

TEST(GenerationDeviceFailure, AFailedEvictionEndsTheSequenceWithItsError) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "default model absent";
  const ModelConfig& c = rt->config();
  std::unique_ptr<KvCache> cache = FailingCache(c);
  const GenerationOptions o = StreamingBudget32();
  const std::vector<int32_t> prompt = rt->tokenizer()->Encode("Tell me a story.", false, true);
  auto g = Generation::Create(rt->tokenizer(), cache.get(), c, prompt, o);
  ASSERT_TRUE(g.ok()) << g.status();
  Generation& gen = **g;
  int32_t fed = static_cast<int32_t>(prompt.size());
  TokenEvent ev;
  int steps = 0;
  // Slots are what the backend would have written: one per fed token.
  ASSERT_TRUE(gen.kv()->Reserve(fed).ok());
  gen.kv()->CommitSlots(fed);
  while (!gen.finished() && steps < 100) {
    ev = gen.AdvanceSampled(fed, 'a');
    fed = 1;
    ++steps;
    if (!gen.finished()) {
      ASSERT_TRUE(gen.kv()->Reserve(gen.kv()->num_slots() + 1).ok());
      gen.kv()->CommitSlots(gen.kv()->num_slots() + 1);
    }
  }
  ASSERT_TRUE(gen.finished());
  EXPECT_EQ(gen.finish_reason(), FinishReason::kError);
  EXPECT_EQ(ev.finish, FinishReason::kError);
  EXPECT_THAT(gen.error(), ::testing::HasSubstr("KV eviction on the device failed: out of workspace"));
  // It failed at its first eviction, at bound + interval slots: step k sees
  // prompt + k - 1 slots (its own token's K/V is written by the next step).
  EXPECT_EQ(static_cast<int32_t>(prompt.size()) + steps - 1, 32 + 8);
  EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks()) << "the failed sequence kept KV blocks";
}

// The recompute after a preemption evicts after each chunk past the prompt;
// when that eviction fails, the sequence ends there, as a decode step's
// failure does, instead of replaying on uncompressed past its reservation.
TEST(GenerationDeviceFailure, AFailedEvictionDuringARecomputeEndsTheSequence) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "default model absent";
  const ModelConfig& c = rt->config();
  std::unique_ptr<KvCache> cache = FailingCache(c);
  const GenerationOptions o = StreamingBudget32();
  const std::vector<int32_t> prompt = rt->tokenizer()->Encode("Tell me a story.", false, true);
  ASSERT_LT(prompt.size(), 30u);
  auto g = Generation::Create(rt->tokenizer(), cache.get(), c, prompt, o);
  ASSERT_TRUE(g.ok()) << g.status();
  Generation& gen = **g;
  // Decode to 39 slots: above the bound (32), not yet at its first eviction (32 + 8).
  int32_t fed = static_cast<int32_t>(prompt.size());
  ASSERT_TRUE(gen.kv()->Reserve(fed).ok());
  gen.kv()->CommitSlots(fed);
  while (gen.kv()->num_slots() < 39) {
    gen.AdvanceSampled(fed, 'a');
    ASSERT_FALSE(gen.finished());
    fed = 1;
    ASSERT_TRUE(gen.kv()->Reserve(gen.kv()->num_slots() + 1).ok());
    gen.kv()->CommitSlots(gen.kv()->num_slots() + 1);
  }
  const int32_t redo = gen.Preempt();
  ASSERT_EQ(redo, 38);
  // The recompute, in chunks of 4 as a small prefill budget would feed it.
  int32_t chunks = 0;
  TokenEvent ev;
  while (!gen.finished() && gen.prefilling()) {
    const int32_t n = static_cast<int32_t>(gen.PendingInput(4).size());
    ASSERT_TRUE(gen.kv()->Reserve(gen.kv()->num_slots() + n).ok());
    gen.kv()->CommitSlots(gen.kv()->num_slots() + n);
    ev = gen.AdvanceSampled(n, 'a');
    ++chunks;
  }
  ASSERT_TRUE(gen.finished()) << "the recompute ran on after its eviction failed";
  EXPECT_EQ(gen.finish_reason(), FinishReason::kError);
  EXPECT_EQ(ev.finish, FinishReason::kError);
  EXPECT_EQ(ev.id, -1) << "a recompute chunk samples nothing";
  EXPECT_THAT(gen.error(), ::testing::HasSubstr("out of workspace"));
  // The first chunk that took the cache above the bound (9 x 4 = 36 slots) evicted, and
  // failed; the tenth was never run.
  EXPECT_EQ(chunks, 9);
  EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks()) << "the failed sequence kept KV blocks";
}

}  // namespace
}  // namespace beacon
