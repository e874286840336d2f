// A device eviction that fails ends the sequence (kError, the device's
// message, KV blocks freed) instead of being logged and dropped: a cache
// that cannot shrink would outgrow what admission reserved for it.
#include <memory>
#include <vector>

#include "engine/generation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv/kv_cache.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class FailingDevice : public KvDeviceStorage {
 public:
  absl::Status Evict(SequenceKv*, KvPolicy*, const KvPolicyOptions&, const Protection&, int32_t, int32_t) override {
    return absl::InternalError("out of workspace");
  }
};

TEST(GenerationDeviceFailure, AFailedEvictionEndsTheSequenceWithItsError) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "default model absent";
  const ModelConfig& c = rt->config();
  KvCache cache(KvCacheShape{c.n_layers, c.n_kv_heads, c.head_dim, 16}, 64, KvStorage::kDevice);
  cache.set_device_storage(std::make_unique<FailingDevice>());
  GenerationOptions o;
  o.max_tokens = 200;
  o.kv = *KvPolicyOptions::DefaultsForName("streaming");
  o.kv.budget = 32;
  o.kv.interval = 8;
  o.kv.sinks = 4;
  o.kv.window = 16;
  o.kv.keep_prompt = false;
  const std::vector<int32_t> prompt = rt->tokenizer()->Encode("Tell me a story.", false, true);
  auto g = Generation::Create(rt->tokenizer(), &cache, c, prompt, o);
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
  EXPECT_EQ(cache.pool().num_free(), cache.pool().num_blocks()) << "the failed sequence kept KV blocks";
}

}  // namespace
}  // namespace beacon
