#include "eval/replay_batch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace beacon::eval {

ReplayBatch::ReplayBatch(Runtime* rt, std::unique_ptr<KvCache> cache)
    : cache_(std::move(cache)), recorder_(PolicyInfoFor(rt->config())), executor_(rt->backend()) {
  executor_.set_observer(this);
}

absl::StatusOr<std::unique_ptr<ReplayBatch>> ReplayBatch::Create(Runtime* rt, std::vector<int32_t> prompt,
                                                                 std::vector<int32_t> forced, int32_t max_new,
                                                                 std::span<const PolicySpec> specs, bool record) {
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  int64_t slots = n_prompt + max_new + 16;
  for (const PolicySpec& s : specs) slots += SequenceCompressor::PeakSlots(s.options, n_prompt, max_new) + 16;
  absl::StatusOr<std::unique_ptr<KvCache>> cache = rt->MakeKvCache(slots);
  if (!cache.ok()) return cache.status();
  std::unique_ptr<ReplayBatch> b(new ReplayBatch(rt, *std::move(cache)));
  GenerationOptions o;
  o.max_tokens = max_new;
  o.ignore_eos = true;  // a trace, or a greedy answer, runs its whole length
  o.forced_tokens = std::move(forced);
  o.sampling.temperature = 0.0f;
  o.sampling.seed = 0;
  for (size_t i = 0; i <= specs.size(); ++i) {
    o.kv = i == 0 ? KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull) : specs[i - 1].options;
    if (i > 0 && !o.kv.compresses()) {
      return absl::InvalidArgumentError(absl::StrCat("spec ", i - 1, ": policy ", std::string(o.kv.policy_name()),
                                                     " does not compress; the full cache is the reference"));
    }
    absl::StatusOr<std::unique_ptr<Generation>> g =
        Generation::Create(rt->tokenizer(), b->cache_.get(), rt->config(), prompt, o);
    if (!g.ok()) return g.status();
    (*g)->set_thread_pool(rt->backend()->host_pool());
    b->gens_.push_back(*std::move(g));
  }
  if (record) b->gens_[0]->set_attention_observer(&b->recorder_);
  return b;
}

void ReplayBatch::AfterForward(std::span<const ExecItem>, const StepExecutor&) {
  if (measure_ != nullptr && *measure_) (*measure_)();
}

absl::Status ReplayBatch::Run(int32_t max_tokens, const std::function<void()>& measure) {
  items_.clear();
  for (const std::unique_ptr<Generation>& g : gens_) {
    if (g->finished()) return absl::FailedPreconditionError("replay: an entry has generated all its tokens");
    items_.push_back(ExecItem{g.get(), max_tokens});
  }
  measure_ = &measure;
  absl::Status s = executor_.Run(items_, &results_);
  measure_ = nullptr;
  return s;
}

absl::Status ReplayBatch::Prefill(int32_t chunk) {
  // Every entry has the same prompt: they leave the prefill together.
  while (gens_[0]->prefilling()) {
    if (absl::Status s = Run(chunk, {}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReplayBatch::Step(const std::function<void()>& measure) { return Run(1, measure); }

}  // namespace beacon::eval
