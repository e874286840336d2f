// The real GenerationEngine under the Scheduler on the default model: the
// client's final record is built from the scheduler's one record of the
// request (its name, timings, preemptions), and the step's token latencies
// come from the same record, so the TTFT and ITL a metrics observer sees are
// the ones the final record reports.
#include "engine/serving/generation_engine.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/serving/serve_request.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/engine/default_model.h"
#include "tests/engine/serving/collect_sink.h"

namespace beacon {
namespace {

using Collect = testing::CollectSink;

PreparedRequest Request(const Runtime& rt, int seed) {
  ServeRequest r;
  r.input = ServeRequest::Input::kTokens;
  for (int i = 0; i < 20; ++i) r.token_ids.push_back(300 + seed * 101 + i * 7);
  r.max_tokens = 40;
  r.ignore_eos = true;
  r.temperature = 0.0f;
  r.request_id = "client-" + std::to_string(seed);
  ServeLimits limits;
  limits.context_length = rt.config().context_length;
  limits.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt.tokenizer(), limits);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

// Two requests of 60 slots at peak on a pool of 96 under optimistic
// admission: both start, the newer is preempted when the pool runs out, and
// recomputes once the older is done.
TEST(GenerationEngine, FinalRecordComesFromTheSchedulersRecord) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(96, 16);
  ASSERT_EQ(cache->pool().num_blocks(), 6);
  GenerationEngine engine(rt->backend(), cache.get(), rt->tokenizer(), rt->config());
  SchedulerConfig sc;
  sc.admission = AdmissionMode::kOptimistic;
  sc.watermark = 0;
  Scheduler sched(sc, cache.get(), &engine);
  std::vector<std::shared_ptr<Collect>> sinks = {std::make_shared<Collect>(), std::make_shared<Collect>()};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(AddRequest(sched, engine, i + 1, Request(*rt, i), sinks[i]).ok());

  int64_t preempted = 0;
  std::vector<double> ttft, itl;
  for (int steps = 0; sched.HasWork(); ++steps) {
    ASSERT_LT(steps, 1000) << "the scheduler never finished";
    StepReport r = sched.Step(SchedClock::now());
    ASSERT_TRUE(r.engine_status.ok()) << r.engine_status;
    preempted += r.preempted;
    ttft.insert(ttft.end(), r.ttft_seconds.begin(), r.ttft_seconds.end());
    itl.insert(itl.end(), r.itl_seconds.begin(), r.itl_seconds.end());
  }
  EXPECT_EQ(cache->pool().num_used(), 0);
  ASSERT_GT(preempted, 0) << "the trace never preempted: it tests nothing";

  int64_t final_preemptions = 0, completion = 0;
  for (int i = 0; i < 2; ++i) {
    const StreamFinal& f = sinks[i]->final;
    SCOPED_TRACE(f.request_id);
    EXPECT_EQ(sinks[i]->finishes, 1);
    EXPECT_EQ(f.request_id, "client-" + std::to_string(i));  // the record's name
    EXPECT_EQ(f.reason, FinishReason::kLength);
    EXPECT_EQ(f.completion_tokens, 40);
    EXPECT_EQ(sinks[i]->tokens.size(), 40u);
    EXPECT_GT(f.ttft_seconds, 0.0);
    EXPECT_LE(f.queue_seconds, f.ttft_seconds);
    EXPECT_LE(f.ttft_seconds, f.total_seconds);
    final_preemptions += f.kv.preemptions;
    completion += f.completion_tokens;
  }
  // The final records count the preemptions the scheduler made (the newer
  // request's), and the observer's latencies: one TTFT per request, and an
  // ITL for every later token.
  EXPECT_EQ(final_preemptions, preempted);
  EXPECT_EQ(sinks[0]->final.kv.preemptions, 0);
  ASSERT_EQ(ttft.size(), 2u);
  EXPECT_EQ(static_cast<int64_t>(itl.size()), completion - 2);
  for (double s : itl) EXPECT_GT(s, 0.0);
  EXPECT_EQ(engine.totals().preemptions, preempted);
}

}  // namespace
}  // namespace beacon
