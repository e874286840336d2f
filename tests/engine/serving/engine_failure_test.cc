// What a failing engine does to the serving core (issue 35), on a real
// EngineLoop over the default model, its backend wrapped in the failure drill
// (engine/fault_injection.h): a failed step ends its requests with
// finish_reason error and the engine's message and the loop goes on; a run
// of failed steps as long as the failure policy's limit breaks the engine:
// queued requests end with the error, new ones are refused UNAVAILABLE naming
// the failure, the owner hears it exactly once, and every KV block is free.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/fault_injection.h"
#include "engine/serving/engine_loop.h"
#include "engine/serving/serve_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"
#include "util/mutex.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

class Result : public RequestSink {
 public:
  void OnTokens(std::span<const int32_t> ids, std::string_view, TextPart, std::span<const PositionLogprobs>) override {
    tokens += static_cast<int32_t>(ids.size());
  }
  void OnFinish(const StreamFinal& f) override {
    final = f;
    done.Notify();
  }
  void OnRejected(const absl::Status& s) override {
    rejected = s;
    done.Notify();
  }
  int32_t tokens = 0;
  StreamFinal final;
  absl::Status rejected;
  Notification done;
};

class EngineFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "models/default.gguf missing";
    limits_.context_length = rt_->config().context_length;
    limits_.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
    cache_ = *rt_->MakeKvCache(2048);
  }

  PreparedRequest Request(int64_t max_tokens) const {
    ServeRequest r;
    r.input = ServeRequest::Input::kTokens;
    for (int i = 0; i < 20; ++i) r.token_ids.push_back(100 + i * 7);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.temperature = 0.0f;
    return *PrepareRequest(r, *rt_->tokenizer(), limits_);
  }

  std::shared_ptr<Result> Submit(EngineLoop* loop, int64_t max_tokens) {
    auto sink = std::make_shared<Result>();
    absl::StatusOr<RequestId> id = loop->Submit(Request(max_tokens), sink);
    EXPECT_TRUE(id.ok()) << id.status();
    return sink;
  }

  static bool Wait(Result& r) { return r.done.WaitForNotificationWithTimeout(absl::Seconds(60)); }

  Runtime* rt_ = nullptr;
  ServeLimits limits_;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(EngineFailureTest, AFailedStepEndsItsRequestsAndTheNextStepsServe) {
  // Steps 1-3 run, 4 and on fail: the first request (prefill + 2 decodes)
  // finishes, the second's first step fails.
  FailingStepsBackend drill(rt_->backend(), 3);
  EngineLoop loop(&drill, cache_.get(), rt_->tokenizer(), rt_->config(), SchedulerConfig{});
  loop.SetFailurePolicy(/*max_failed_steps=*/0, nullptr);  // never broken
  std::shared_ptr<Result> ok = Submit(&loop, 3);
  ASSERT_TRUE(Wait(*ok));
  EXPECT_EQ(ok->final.reason, FinishReason::kLength);
  EXPECT_EQ(ok->tokens, 3);
  std::shared_ptr<Result> failed = Submit(&loop, 8);
  ASSERT_TRUE(Wait(*failed));
  EXPECT_EQ(failed->final.reason, FinishReason::kError);
  EXPECT_THAT(failed->final.error, HasSubstr("injected device failure"));
  // max_failed_steps 0: the engine never counts as broken.
  std::shared_ptr<Result> again = Submit(&loop, 8);
  ASSERT_TRUE(Wait(*again));
  EXPECT_EQ(again->final.reason, FinishReason::kError);
  EXPECT_TRUE(loop.failure().ok());
  EXPECT_FALSE(loop.failed());
  loop.Stop();
  EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
}

TEST_F(EngineFailureTest, FailedStepsInARowBreakTheEngineOnce) {
  FailingStepsBackend drill(rt_->backend(), 0);  // every step fails
  EngineLoop loop(&drill, cache_.get(), rt_->tokenizer(), rt_->config(), SchedulerConfig{});
  std::atomic<int> heard{0};
  Notification broken;
  absl::Status heard_status;
  loop.SetFailurePolicy(3, [&](const absl::Status& s) {
    heard_status = s;
    if (heard.fetch_add(1) == 0) broken.Notify();
  });
  // One request per step fails: the third failure in a row breaks the engine.
  std::vector<std::shared_ptr<Result>> sinks;
  for (int i = 0; i < 3 && !loop.failed(); ++i) {
    sinks.push_back(Submit(&loop, 4));
    ASSERT_TRUE(Wait(*sinks.back()));
    EXPECT_EQ(sinks.back()->final.reason, FinishReason::kError);
  }
  ASSERT_TRUE(broken.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(heard.load(), 1);
  EXPECT_EQ(heard_status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(heard_status.message()), HasSubstr("failed 3 steps in a row"));
  EXPECT_THAT(std::string(heard_status.message()), HasSubstr("injected device failure"));
  EXPECT_TRUE(loop.failed());
  EXPECT_EQ(loop.failure(), heard_status);
  // New requests are refused, naming why.
  absl::StatusOr<RequestId> refused = loop.Submit(Request(4), std::make_shared<Result>());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("cannot serve"));
  // Nothing in flight, nothing held.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (loop.Stats().inflight > 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(loop.Stats().inflight, 0);
  loop.Stop();
  EXPECT_EQ(heard.load(), 1);
  EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
}

TEST_F(EngineFailureTest, QueuedRequestsEndWithTheErrorWhenTheEngineBreaks) {
  FailingStepsBackend drill(rt_->backend(), 0);
  SchedulerConfig sc;
  sc.max_running = 1;  // the others wait in the queue
  EngineLoop loop(&drill, cache_.get(), rt_->tokenizer(), rt_->config(), sc);
  loop.SetFailurePolicy(1, nullptr);
  // The engine may break before the last submissions: those are refused at
  // once, as a sink's OnRejected would say.
  std::vector<std::shared_ptr<Result>> sinks;
  for (int i = 0; i < 4; ++i) {
    auto sink = std::make_shared<Result>();
    if (absl::StatusOr<RequestId> id = loop.Submit(Request(4), sink); !id.ok()) sink->OnRejected(id.status());
    sinks.push_back(sink);
  }
  for (auto& s : sinks) {
    ASSERT_TRUE(Wait(*s));
    // Failed in its step, ended with the engine, or refused if it reached the
    // loop after the engine broke: never left hanging, never a success.
    if (s->rejected.ok()) {
      EXPECT_EQ(s->final.reason, FinishReason::kError);
      EXPECT_FALSE(s->final.error.empty());
    } else {
      EXPECT_EQ(s->rejected.code(), absl::StatusCode::kUnavailable);
    }
  }
  EXPECT_TRUE(loop.failed());
  loop.Stop();
  EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
}

}  // namespace
}  // namespace beacon
