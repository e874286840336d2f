// Automatic prefix caching on the real GenerationEngine and Scheduler over
// the default model: a request whose prompt starts with blocks an earlier
// request computed takes them by reference, runs only the rest, and writes
// exactly the greedy tokens it writes with the cache off, under `full` and
// under every compressing policy while it evicts (keep_prompt: the prompt's
// blocks are never written again). The forward pass is batch-invariant on
// the CPU backend, so equality is exact.
#include <memory>
#include <string>
#include <vector>

#include "engine/serving/generation_engine.h"
#include "engine/serving/serve_request.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/engine/default_model.h"
#include "tests/engine/serving/collect_sink.h"

namespace beacon {
namespace {

using Collect = testing::CollectSink;

constexpr int32_t kPrefix = 100;  // a "system prompt": 6 whole blocks of 16 and 4 tokens

class PrefixCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "models/default.gguf missing";
    limits_.context_length = rt_->config().context_length;
    limits_.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  }

  // The shared prefix, then `question`'s 12 tokens.
  PreparedRequest Request(int question, const KvPolicyOptions& kv) const {
    ServeRequest r;
    r.input = ServeRequest::Input::kTokens;
    for (int i = 0; i < kPrefix; ++i) r.token_ids.push_back(200 + (i * 53) % 4000);
    for (int i = 0; i < 12; ++i) r.token_ids.push_back(5000 + question * 17 + i);
    r.max_tokens = 96;
    r.ignore_eos = true;
    r.temperature = 0.0f;
    absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
    EXPECT_TRUE(p.ok()) << p.status();
    p->options.kv = kv;  // peak_slots stays full's: a safe over-reservation
    return *std::move(p);
  }

  // Hands the engine and the scheduler request `id` (`question` under `kv`).
  void Submit(GenerationEngine* engine, Scheduler* sched, RequestId id, int question, const KvPolicyOptions& kv,
              std::shared_ptr<Collect> sink) const {
    ASSERT_TRUE(AddRequest(*sched, *engine, id, Request(question, kv), std::move(sink)).ok());
  }

  // Runs request (question 0) alone, then questions 1 and 0 again together;
  // returns the three sinks.
  std::vector<std::shared_ptr<Collect>> Serve(const KvPolicyOptions& kv, bool cache_on,
                                              AdmissionMode mode = AdmissionMode::kReserve) {
    std::unique_ptr<KvCache> cache = *rt_->MakeKvCache(2048);
    GenerationEngine engine(rt_->backend(), cache.get(), rt_->tokenizer(), rt_->config());
    SchedulerConfig sc;
    sc.admission = mode;
    sc.prefill_chunk = 32;  // chunks of other sizes than the requests that reuse them
    Scheduler sched(sc, cache.get(), &engine);
    if (cache_on) {
      sched.kv().EnablePrefixCache(GenerationEngine::PrefixCacheSaltFor("default", rt_->config(), *cache));
    }
    std::vector<std::shared_ptr<Collect>> sinks;
    auto submit = [&](RequestId id, int question) {
      sinks.push_back(std::make_shared<Collect>());
      Submit(&engine, &sched, id, question, kv, sinks.back());
    };
    submit(1, 0);
    while (sched.HasWork()) sched.Step(SchedClock::now());
    submit(2, 1);
    submit(3, 0);
    while (sched.HasWork()) sched.Step(SchedClock::now());
    EXPECT_EQ(cache->pool().num_used(), 0) << "a request kept KV blocks";
    EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks());
    if (cache_on) {
      // Request 1 looked up 112 tokens and found none; 2 and 3 found 96 each.
      EXPECT_EQ(sched.kv().prefix_queries(), 3 * (kPrefix + 12));
      EXPECT_EQ(sched.kv().prefix_hits(), 2 * 96);
      // Every full prompt block is cached and idle now: request 3's 7th
      // block (tokens 96..111, its question included) too.
      EXPECT_EQ(cache->pool().num_idle(), sched.kv().prefix_cache()->num_blocks());
    } else {
      EXPECT_EQ(sched.kv().prefix_queries(), 0);
    }
    return sinks;
  }

  Runtime* rt_ = nullptr;
  ServeLimits limits_;
};

// One instance per policy (PrefixCache/PrefixCacheEveryPolicyTest.
// GreedyOutputIsTheSameWithTheCacheOn/beacon, ...), so that the sanitizer
// runs can take the one they have time for (tools/sanitize.sh).
class PrefixCacheEveryPolicyTest : public PrefixCacheTest, public ::testing::WithParamInterface<KvPolicyKind> {};

TEST_P(PrefixCacheEveryPolicyTest, GreedyOutputIsTheSameWithTheCacheOn) {
  const KvPolicyKind kind = GetParam();
  KvPolicyOptions kv = KvPolicyOptions::DefaultsFor(kind);
  kv.keep_prompt = true;
  kv.budget = 48;  // the 96 tokens out evict several times
  kv.interval = 16;
  kv.window = 16;
  kv.sinks = 4;
  ASSERT_TRUE(PrefixShareable(kv));
  const std::vector<std::shared_ptr<Collect>> off = Serve(kv, false);
  const std::vector<std::shared_ptr<Collect>> on = Serve(kv, true);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(on[i]->tokens.size(), 96u) << "request " << i + 1;
    EXPECT_EQ(on[i]->tokens, off[i]->tokens) << "request " << i + 1;
    EXPECT_EQ(off[i]->final.cached_tokens, 0);
  }
  EXPECT_EQ(on[0]->final.cached_tokens, 0);
  EXPECT_EQ(on[1]->final.cached_tokens, 96);
  EXPECT_EQ(on[2]->final.cached_tokens, 96);
  if (kv.compresses()) {
    EXPECT_GT(on[1]->final.kv.evictions, 0);
  }
  // The same question twice, the same answer (and the cache made no difference).
  EXPECT_EQ(on[2]->tokens, on[0]->tokens);
  EXPECT_NE(on[1]->tokens, on[0]->tokens);
}

INSTANTIATE_TEST_SUITE_P(PrefixCache, PrefixCacheEveryPolicyTest, ::testing::ValuesIn(KvPolicyKinds()),
                         [](const ::testing::TestParamInfo<KvPolicyKind>& info) {
                           return std::string(KvPolicyName(info.param));
                         });

TEST_F(PrefixCacheTest, OptimisticAdmissionReusesToo) {
  const KvPolicyOptions full = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  const std::vector<std::shared_ptr<Collect>> off = Serve(full, false, AdmissionMode::kOptimistic);
  const std::vector<std::shared_ptr<Collect>> on = Serve(full, true, AdmissionMode::kOptimistic);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(on[i]->tokens, off[i]->tokens) << "request " << i + 1;
  EXPECT_EQ(on[1]->final.cached_tokens, 96);
}

// Two live requests on one cached prefix: the slots the engine reports held
// count the shared blocks once (the pool's use), not once per request.
TEST_F(PrefixCacheTest, HeldSlotsCountSharedBlocksOnce) {
  const KvPolicyOptions full = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  std::unique_ptr<KvCache> cache = *rt_->MakeKvCache(2048);
  GenerationEngine engine(rt_->backend(), cache.get(), rt_->tokenizer(), rt_->config());
  Scheduler sched(SchedulerConfig{}, cache.get(), &engine);
  sched.kv().EnablePrefixCache(1);
  Submit(&engine, &sched, 1, 0, full, std::make_shared<Collect>());
  sched.Step(SchedClock::now());  // request 1 runs its 112-token prompt
  Submit(&engine, &sched, 2, 1, full, std::make_shared<Collect>());
  for (int i = 0; i < 4; ++i) sched.Step(SchedClock::now());
  ASSERT_EQ(sched.num_running(), 2);
  const int64_t cached = sched.kv().HeldSlots();
  const int64_t logical = engine.KvLogicalTokens();
  // Each holds 112 + 4 or so slots; the six prefix blocks are held once.
  const int32_t used = cache->pool().num_used();
  EXPECT_EQ(used, 8 + 2);  // 6 shared, and two own blocks each
  EXPECT_LE(cached, used * 16);
  EXPECT_GT(cached, (used - 2) * 16);
  EXPECT_EQ(logical - cached, 96);  // what sharing saves: request 2's reused prefix
  sched.AbortAll(RequestState::kFinishedCancelled);
  EXPECT_EQ(cache->pool().num_used(), 0);
}

// A compressing policy that may evict prompt slots never shares: its prompt
// blocks are not inserted, nor does it take others'.
TEST_F(PrefixCacheTest, APolicyThatMovesPromptSlotsNeitherSharesNorCaches) {
  KvPolicyOptions kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  kv.keep_prompt = false;
  kv.budget = 64;
  kv.interval = 16;
  ASSERT_FALSE(PrefixShareable(kv));
  std::unique_ptr<KvCache> cache = *rt_->MakeKvCache(2048);
  GenerationEngine engine(rt_->backend(), cache.get(), rt_->tokenizer(), rt_->config());
  Scheduler sched(SchedulerConfig{}, cache.get(), &engine);
  sched.kv().EnablePrefixCache(1);
  for (RequestId id : {1, 2}) {
    auto sink = std::make_shared<Collect>();
    Submit(&engine, &sched, id, 0, kv, sink);
    while (sched.HasWork()) sched.Step(SchedClock::now());
    EXPECT_EQ(sink->final.cached_tokens, 0);
  }
  EXPECT_EQ(sched.kv().prefix_cache()->num_blocks(), 0);
  EXPECT_EQ(sched.kv().prefix_hits(), 0);
}

}  // namespace
}  // namespace beacon
