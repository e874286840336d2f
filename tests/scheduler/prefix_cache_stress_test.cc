// The prefix cache under the scheduler, on the SimEngine's real BlockPool and
// PrefixCache: shared blocks are counted once by admission, outlive the
// request that computed them while others hold them, and go idle (reusable,
// counted free) when the last holder is done. A randomized 1,000-request run
// per admission mode with shared system prompts, cancellations, deadlines
// and (optimistic) preemptions checks at every engine step that the pool's
// use is exactly the blocks live sequences hold (each counted once, its
// refcount the number of holders: no leak, no double free) and, in reserve
// mode, that what is held plus what is promised never exceeds the pool.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/sched_test_util.h"

namespace beacon {
namespace {

using namespace schedtest;

SimSequenceSpec Shared(SimSequenceSpec s, uint64_t prefix_id, int32_t prefix_tokens) {
  s.prefix_id = prefix_id;
  s.prefix_tokens = prefix_tokens;
  return s;
}

// Two requests with one 320-token system prompt (20 blocks) in a pool of 48:
// alone each needs 20 + 8 blocks, so without sharing the second would wait;
// with it the second reserves only its own 8 (+1 for the last prompt block).
TEST(PrefixCacheScheduling, SharedBlocksAreCountedOnceByAdmission) {
  for (bool cache : {false, true}) {
    SCOPED_TRACE(cache ? "cache on" : "cache off");
    Harness h(Config(AdmissionMode::kReserve, 8, 512, 512), 48);
    if (cache) h.sched.kv().EnablePrefixCache(/*salt=*/1);
    ASSERT_TRUE(h.Add(1, Shared(Full(330, 100, 100), 7, 320)).ok());
    h.Step();  // request 1 runs its whole prompt
    ASSERT_TRUE(h.Add(2, Shared(Full(330, 100, 100), 7, 320)).ok());
    h.Step();
    EXPECT_EQ(h.sched.num_running(), cache ? 2 : 1);
    if (!cache) continue;
    const SchedRequest* r2 = h.sched.Find(2);
    ASSERT_NE(r2, nullptr);
    EXPECT_EQ(r2->shared_blocks, 20);
    EXPECT_EQ(r2->reserved_blocks, Ceil(430, 16) - 20);
    // The engine is told, not left to infer: request 2's first chunk starts
    // past the 320 adopted slots (ScheduledSeq::computed) and runs the other 10.
    const std::vector<ScheduledSeq>& work = h.engine.last_work();
    auto w2 = std::find_if(work.begin(), work.end(), [](const ScheduledSeq& w) { return w.id == 2; });
    ASSERT_NE(w2, work.end());
    EXPECT_TRUE(w2->prefill);
    EXPECT_EQ(w2->computed, 320);
    EXPECT_EQ(w2->n_tokens, 10);
    EXPECT_EQ(w2->kv, h.sched.kv().kv(2));
    EXPECT_EQ(h.sched.kv().prefix_hits(), 320);
    EXPECT_EQ(h.sched.kv().prefix_queries(), 330 + 330);
    // Held once: 27 of request 1's, request 2's last prompt block and its first token.
    EXPECT_EQ(h.engine.UsedBlocks(), Ceil(331, 16) + 1);
    EXPECT_LE(h.sched.reserved_blocks(), 48);
    // Cancel the request that computed them: request 2 keeps them held.
    ASSERT_TRUE(h.sched.Abort(1, RequestState::kFinishedCancelled));
    EXPECT_EQ(h.engine.UsedBlocks(), 20 + h.engine.kv(2)->own_blocks());
    ASSERT_TRUE(h.RunUntilIdle());
    EXPECT_EQ(h.engine.UsedBlocks(), 0);
    EXPECT_EQ(h.engine.cache().pool().num_idle(), 20 + 0);  // the prefix; request 1's 21st block held token 320..329
    EXPECT_EQ(h.engine.cache().pool().num_free(), 48);
  }
}

// A request that wants prompt logprobs runs its whole prompt, as the real
// engine (ShareablePromptBlocks): it takes no cached block and shares nothing.
TEST(PrefixCacheScheduling, PromptLogprobsTakeNoCachedBlocks) {
  Harness h(Config(AdmissionMode::kReserve, 8, 512, 512), 64);
  h.sched.kv().EnablePrefixCache(/*salt=*/1);
  ASSERT_TRUE(h.Add(1, Shared(Full(330, 100, 100), 7, 320)).ok());
  h.Step();
  SimSequenceSpec wants = Shared(Full(330, 100, 100), 7, 320);
  wants.prompt_logprobs = true;
  ASSERT_TRUE(h.Add(2, wants).ok());
  h.Step();
  const SchedRequest* r2 = h.sched.Find(2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->shared_blocks, 0);
  EXPECT_EQ(h.sched.kv().prefix_hits(), 0);
  ASSERT_TRUE(h.RunUntilIdle());
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
}

struct Planned {
  SimSequenceSpec spec;
  std::optional<SchedClock::duration> deadline;
};

std::vector<Planned> Plan(int n, std::mt19937_64& rng) {
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int32_t prefixes[] = {64, 160, 320, 500};  // four system prompts
  std::vector<Planned> plan(n);
  for (Planned& p : plan) {
    const int32_t k = static_cast<int32_t>(uni(0, 4));  // 4: no shared prefix
    const int32_t own = static_cast<int32_t>(uni(1, 200));
    const int32_t prompt = k < 4 ? prefixes[k] + own : own;
    const int32_t max_new = static_cast<int32_t>(uni(1, 400));
    const int32_t output = static_cast<int32_t>(uni(1, 500));
    if (uni(0, 2) < 2) {
      p.spec = Full(prompt, output, max_new);
    } else {
      p.spec = Beacon(prompt, output, max_new, static_cast<int32_t>(uni(2, 8)) * 32, 16);
      p.spec.kv.keep_prompt = uni(0, 3) > 0;  // a quarter may evict the prompt: never share
    }
    if (k < 4) p.spec = Shared(p.spec, 100 + k, prefixes[k]);
    if (uni(0, 5) == 0) p.deadline = std::chrono::milliseconds(uni(50, 6000));
  }
  return plan;
}

void Stress(AdmissionMode mode, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr int kN = 1000;
  constexpr int32_t kBlocks = 500, kBs = 16;
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const std::vector<Planned> plan = Plan(kN, rng);
  const bool reserve = mode == AdmissionMode::kReserve;
  Harness h(Config(mode, 32, 512, 128), kBlocks, kBs);
  h.sched.kv().EnablePrefixCache(/*salt=*/1);
  const BlockPool& pool = h.engine.cache().pool();
  std::set<RequestId> live;
  std::vector<bool> cancelled(kN, false);
  int violations = 0;
  auto violation = [&](const std::string& what) {
    if (violations++ == 0) ADD_FAILURE() << "step " << h.steps << ": " << what;
  };
  h.engine.SetRunHook([&](const SimEngine&) {
    std::map<int32_t, int32_t> holders;  // block id -> live sequences holding it
    for (RequestId id : live) {
      const SequenceKv* kv = h.sched.kv().kv(id);
      if (kv == nullptr) continue;
      for (int32_t b : kv->block_ids()) ++holders[b];
      const SchedRequest* r = h.sched.Find(id);
      if (reserve && r != nullptr && r->state == RequestState::kRunning && kv->own_blocks() > r->reserved_blocks) {
        violation("request " + std::to_string(id) + " allocated past its reservation");
      }
    }
    if (static_cast<int32_t>(holders.size()) != pool.num_used()) {
      violation("pool use " + std::to_string(pool.num_used()) + " != blocks held " + std::to_string(holders.size()));
    }
    for (const auto& [b, n] : holders) {
      if (pool.refcount(b) != n) violation("block " + std::to_string(b) + " refcount != holders");
    }
    if (h.sched.kv().prefix_cache()->num_blocks() != pool.num_cached())
      violation("index and pool disagree on cached blocks");
    if (reserve && h.sched.reserved_blocks() > kBlocks) violation("held + promised exceeds the pool");
  });

  RequestId next = 0;
  size_t removed_seen = 0;
  int n_cancelled = 0, n_expired = 0, n_finished = 0;
  while (next < kN || h.sched.HasWork()) {
    ASSERT_LT(h.steps, 1000000) << "no progress";
    for (int64_t k = uni(0, 4); k > 0 && next < kN; --k, ++next) {
      ASSERT_TRUE(h.Add(next, plan[next].spec, plan[next].deadline).ok()) << next;
      live.insert(next);
    }
    if (!live.empty() && uni(0, 49) == 0) {
      auto it = live.begin();
      std::advance(it, uni(0, static_cast<int64_t>(live.size()) - 1));
      EXPECT_TRUE(h.sched.Abort(*it, RequestState::kFinishedCancelled));
      cancelled[*it] = true;
    }
    h.Step();
    for (; removed_seen < h.engine.remove_order().size(); ++removed_seen) {
      const RequestId id = h.engine.remove_order()[removed_seen];
      live.erase(id);
      const RequestState st = h.engine.records().at(id).state;
      if (cancelled[id]) {
        ++n_cancelled;
      } else if (st == RequestState::kFinishedTimeLimit) {
        ++n_expired;
      } else {
        h.ExpectFinishedNormally(id, plan[id].spec);
        ++n_finished;
      }
    }
  }
  std::printf("%s: %lld steps, %d finished, %d cancelled, %d expired, preempted %lld, hits %lld of %lld tokens\n",
              std::string(AdmissionModeName(mode)).c_str(), static_cast<long long>(h.steps), n_finished, n_cancelled,
              n_expired, static_cast<long long>(h.preempted), static_cast<long long>(h.sched.kv().prefix_hits()),
              static_cast<long long>(h.sched.kv().prefix_queries()));
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(n_finished + n_cancelled + n_expired, kN);
  for (RequestId id = 0; id < kN; ++id) EXPECT_EQ(h.engine.records().at(id).remove_calls, 1) << id;
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
  EXPECT_EQ(pool.num_free(), kBlocks);
  EXPECT_EQ(pool.num_idle(), pool.num_cached());
  EXPECT_EQ(h.engine.exhausted(), 0);
  EXPECT_EQ(h.engine.protocol_errors(), 0);
  const std::vector<RequestId>& order = h.engine.first_run_order();
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << "first admissions out of arrival order";
  // The run exercised what it claims to.
  EXPECT_GT(h.sched.kv().prefix_hits(), h.sched.kv().prefix_queries() / 5);
  EXPECT_GT(n_cancelled, 10);
  EXPECT_GT(n_expired, 10);
  if (!reserve) {
    EXPECT_GT(h.preempted, 0);
  }
}

TEST(PrefixCacheScheduling, ReserveStress) { Stress(AdmissionMode::kReserve, 20261201); }
TEST(PrefixCacheScheduling, OptimisticStress) { Stress(AdmissionMode::kOptimistic, 20261201); }

}  // namespace
}  // namespace beacon
