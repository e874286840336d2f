#include "bench/growth_bench.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/generation.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon {

absl::StatusOr<std::vector<GrowthSample>> BenchGrowth(Runtime* rt, const KvPolicyOptions& options, int32_t prompt_len,
                                                      int32_t total_tokens, int32_t window) {
  using Clock = std::chrono::steady_clock;
  const ModelConfig& cfg = rt->config();
  if (total_tokens > cfg.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("growth: ", total_tokens, " tokens exceed the model's context of ", cfg.context_length));
  }
  if (prompt_len < 1 || window < 1 || total_tokens - prompt_len < window) {
    return absl::InvalidArgumentError(absl::StrCat("growth: ", total_tokens, " tokens leave no window of ", window,
                                                   " decode steps after a ", prompt_len, "-token prompt"));
  }
  std::unique_ptr<SequenceCompressor> compressor;
  if (options.compresses()) {
    auto c = SequenceCompressor::Create(options, PolicyInfoFor(cfg), prompt_len);
    if (!c.ok()) return c.status();
    compressor = std::move(*c);
  }
  const int32_t steps = total_tokens - prompt_len;
  const int64_t peak = SequenceCompressor::PeakSlots(options, prompt_len, steps + 1);
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(peak + 16);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  SequenceKv seq(cache.get());
  KvPolicy* policy = compressor != nullptr ? compressor->policy() : nullptr;

  // A fixed pseudo-random prompt: the speed does not depend on its text.
  std::vector<int32_t> prompt(prompt_len);
  for (int32_t i = 0; i < prompt_len; ++i) prompt[i] = (i * 31 + 7) % cfg.vocab_size;
  std::vector<float> logits;
  auto argmax = [&] { return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
  ForwardEntry e{&seq, prompt, 0, false, policy};
  if (absl::Status s = rt->backend()->Forward(std::span(&e, 1), &logits); !s.ok()) return s;

  std::vector<GrowthSample> out;
  std::vector<int32_t> last = {argmax()};
  Clock::time_point window_start = Clock::now();
  for (int32_t i = 0; i < steps; ++i) {
    ForwardEntry d{&seq, last, prompt_len + i, false, policy};
    if (absl::Status s = rt->backend()->Forward(std::span(&d, 1), &logits); !s.ok()) return s;
    last = {argmax()};
    if (compressor != nullptr) compressor->AfterDecodeStep(&seq, prompt_len + i + 1);
    if ((i + 1) % window == 0) {
      const Clock::time_point now = Clock::now();
      GrowthSample g;
      g.context = prompt_len + i + 1;
      g.cached_slots = seq.num_slots();
      g.tokens_per_s = window / std::chrono::duration<double>(now - window_start).count();
      out.push_back(g);
      window_start = now;
    }
  }
  seq.Release();
  return out;
}

}  // namespace beacon
