// Sample groups (n > 1) on the real GenerationEngine and Scheduler over the
// default model: the later samples wait for sample 0 to run the prompt, take
// its whole prompt blocks by reference (the pool holds them once), reserve
// only what they do not share, the shared blocks staying counted after sample
// 0 finishes while others still hold them, and produce exactly what each sample
// alone with its seed produces. When sharing is not allowed (prompt
// logprobs, a policy that may evict prompt slots) each sample runs the whole
// prompt itself.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/serving/generation_engine.h"
#include "engine/serving/serve_request.h"
#include "gtest/gtest.h"
#include "kv/serving/prefix_cache.h"
#include "scheduler/scheduler.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace sample_group_test {
namespace {

class Collect : public RequestSink {
 public:
  explicit Collect(const BlockPool* pool, int32_t* peak) : pool_(pool), peak_(peak) {}
  // Called inside the step, after the step's K/V went in: the pool's use then.
  void OnTokens(std::span<const int32_t> ids, std::string_view, TextPart, std::span<const PositionLogprobs>) override {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    *peak_ = std::max(*peak_, pool_->num_used());
  }
  void OnFinish(const StreamFinal& f) override { final = f; }
  void OnRejected(const absl::Status& s) override { rejected = s; }
  std::vector<int32_t> tokens;
  StreamFinal final;
  absl::Status rejected;

 private:
  const BlockPool* pool_;
  int32_t* peak_;
};

class SampleGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "models/default.gguf missing";
    limits_.context_length = rt_->config().context_length;
    limits_.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  }

  // 70 prompt tokens: 4 whole blocks of 16 shareable, the block of the last
  // prompt token (64..69) run by every sample.
  ServeRequest Request(int64_t n) const {
    ServeRequest r;
    r.input = ServeRequest::Input::kTokens;
    for (int i = 0; i < 70; ++i) r.token_ids.push_back(100 + (i * 37) % 5000);
    r.max_tokens = 12;
    r.ignore_eos = true;
    r.temperature = 1.0f;
    r.sampling.seed = 42;
    r.n = n;
    return r;
  }

  struct Run {
    std::vector<std::shared_ptr<Collect>> sinks;
    int32_t peak_used_blocks = 0;
    std::vector<int32_t> reserved_per_step;
    std::vector<int32_t> running_per_step;
  };
  // Runs the request's samples as EngineLoop::SubmitGroup queues them.
  Run Serve(const ServeRequest& r, AdmissionMode mode = AdmissionMode::kReserve) {
    std::unique_ptr<KvCache> cache = *rt_->MakeKvCache(4096);
    GenerationEngine engine(rt_->backend(), cache.get(), rt_->tokenizer(), rt_->config());
    SchedulerConfig sc;
    sc.admission = mode;
    Scheduler sched(sc, cache.get(), &engine);
    absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
    EXPECT_TRUE(p.ok()) << p.status();
    Run out;
    std::vector<PreparedRequest> samples = ExpandSamples(*p);
    const RequestId first = 1;
    for (size_t i = 0; i < samples.size(); ++i) {
      auto sink = std::make_shared<Collect>(&cache->pool(), &out.peak_used_blocks);
      out.sinks.push_back(sink);
      samples[i].group = samples.size() > 1 ? first : 0;
      EXPECT_TRUE(AddRequest(sched, engine, first + i, samples[i], sink).ok());
    }
    while (sched.HasWork()) {
      sched.Step(SchedClock::now());
      out.reserved_per_step.push_back(sched.reserved_blocks());
      out.running_per_step.push_back(sched.num_running());
    }
    EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks()) << "a sample kept KV blocks";
    EXPECT_EQ(sched.reserved_blocks(), 0);
    return out;
  }

  Runtime* rt_ = nullptr;
  ServeLimits limits_;
};

TEST_F(SampleGroupTest, EachSampleIsTheRequestAloneWithItsSeed) {
  const Run group = Serve(Request(4));
  ASSERT_EQ(group.sinks.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    ServeRequest alone = Request(1);
    alone.sampling.seed = 42 + i;
    const Run one = Serve(alone);
    EXPECT_EQ(group.sinks[i]->tokens, one.sinks[0]->tokens) << "sample " << i;
    EXPECT_EQ(group.sinks[i]->final.seed, 42u + i);
    EXPECT_EQ(group.sinks[i]->tokens.size(), 12u);
  }
  // Different seeds, different samples (a 12-token collision is not plausible).
  EXPECT_NE(group.sinks[0]->tokens, group.sinks[1]->tokens);
}

TEST_F(SampleGroupTest, ThePromptsBlocksAreHeldAndReservedOnce) {
  const Run one = Serve(Request(1));
  const Run group = Serve(Request(4));
  // Measured while tokens stream: a sample holds 70 + 11 slots at most (its
  // 12th token is never fed back), and the step that samples the last token
  // frees its blocks before streaming it, so the most seen is 80 slots: one
  // sample 5 blocks; four, the 4 shared prompt blocks once plus one own block
  // each (slots 64..79), with sample 0 a step ahead of the others.
  EXPECT_EQ(one.peak_used_blocks, 5);
  EXPECT_EQ(group.peak_used_blocks, 4 + 4 * 1);
  int32_t peak_reserved = 0;
  for (int32_t r : group.reserved_per_step) peak_reserved = std::max(peak_reserved, r);
  // Reserved: a footprint is 70 + 12 = 82 slots, 6 blocks; sample 0 reserves
  // it all, each other sample the 2 it does not share.
  EXPECT_EQ(peak_reserved, 6 + 3 * 2);
  // Sample 0 finishes a step before the others (it started a step earlier):
  // while they run, its 4 shared blocks stay reserved.
  bool saw = false;
  for (size_t s = 0; s < group.running_per_step.size(); ++s) {
    if (group.running_per_step[s] == 3) {
      saw = true;
      EXPECT_EQ(group.reserved_per_step[s], 4 + 3 * 2) << "step " << s;
    }
  }
  EXPECT_TRUE(saw) << "no step ran the three later samples alone";
}

TEST_F(SampleGroupTest, WithoutSharingEachSampleRunsThePromptItself) {
  ServeRequest r = Request(3);
  r.prompt_logprobs = 1;  // needs every prompt row of every sample
  const Run group = Serve(r);
  EXPECT_EQ(group.peak_used_blocks, 3 * 5);
  for (int i = 0; i < 3; ++i) {
    ServeRequest alone = Request(1);
    alone.prompt_logprobs = 1;
    alone.sampling.seed = 42 + i;
    EXPECT_EQ(group.sinks[i]->tokens, Serve(alone).sinks[0]->tokens) << "sample " << i;
  }
  // A compressing policy that may evict prompt slots shares nothing either.
  KvPolicyOptions kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kSnapKv);
  kv.keep_prompt = false;
  EXPECT_EQ(ShareablePromptBlocks(kv, false, 70, 16), 0);
  kv.keep_prompt = true;
  EXPECT_EQ(ShareablePromptBlocks(kv, false, 70, 16), 4);
  EXPECT_EQ(ShareablePromptBlocks(kv, false, 64, 16), 3);  // the last prompt token always runs
  EXPECT_EQ(ShareablePromptBlocks(kv, false, 16, 16), 0);
}

TEST_F(SampleGroupTest, OptimisticAdmissionSharesToo) {
  const Run group = Serve(Request(4), AdmissionMode::kOptimistic);
  EXPECT_EQ(group.peak_used_blocks, 4 + 4 * 1);
  const Run reserve = Serve(Request(4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(group.sinks[i]->tokens, reserve.sinks[i]->tokens);
}

TEST_F(SampleGroupTest, NIsBoundedByName) {
  ServeRequest r = Request(65);
  absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("n: 65 is outside [1, 64]"), std::string::npos) << p.status();
  r.n = 0;
  EXPECT_FALSE(PrepareRequest(r, *rt_->tokenizer(), limits_).ok());
}

}  // namespace
}  // namespace sample_group_test
}  // namespace beacon
