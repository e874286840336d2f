#include "bench/policy_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "engine/generation.h"
#include "kv/sequence_compressor.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

// Forwards to the real policy and times the per-step observation calls.
// ObserveAttention runs on pool threads concurrently: its time is summed
// across threads (CPU time), which overstates wall time when both threads
// observe at once: a conservative figure.
class TimedPolicy : public KvPolicy {
 public:
  explicit TimedPolicy(KvPolicy* inner) : inner_(inner) {}
  std::string_view name() const override { return inner_->name(); }
  void ObserveQuery(int layer, const float* q, int32_t position) override {
    const auto t0 = Clock::now();
    inner_->ObserveQuery(layer, q, position);
    Add(t0);
  }
  bool wants_attention() const override { return inner_->wants_attention(); }
  void ObserveAttention(int layer, int kv_head, const float* probs, int group, int32_t n_slots) override {
    const auto t0 = Clock::now();
    inner_->ObserveAttention(layer, kv_head, probs, group, n_slots);
    Add(t0);
  }
  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    inner_->Score(layer, kv_head, keys, position, scores);
  }
  double seconds() const { return ns_.load() * 1e-9; }

 private:
  void Add(Clock::time_point t0) {
    ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }
  KvPolicy* inner_;
  std::atomic<int64_t> ns_{0};
};

}  // namespace

absl::StatusOr<PolicyBenchResult> BenchPolicy(Runtime* rt, const KvPolicyOptions& options, int32_t prompt_len,
                                              int32_t steps, bool policy_pool) {
  const ModelConfig& cfg = rt->config();
  auto compressor = SequenceCompressor::Create(options, PolicyInfoFor(cfg), prompt_len);
  if (!compressor.ok()) return compressor.status();
  if (policy_pool)
    (*compressor)->set_thread_pool(rt->backend()->host_pool());  // as serving does (GenerationEngine::Add)
  const int64_t peak = SequenceCompressor::PeakSlots(options, prompt_len, steps + 1);
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(peak + 16);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  SequenceKv seq(cache.get());
  TimedPolicy timed((*compressor)->policy());
  KvPolicy* policy = options.compresses() ? &timed : nullptr;

  std::vector<int32_t> prompt(prompt_len);
  for (int32_t i = 0; i < prompt_len; ++i) prompt[i] = (i * 31 + 7) % cfg.vocab_size;
  std::vector<float> logits;
  auto argmax = [&] { return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
  ForwardEntry e{&seq, prompt, 0, false, policy};
  if (absl::Status s = rt->backend()->Forward(std::span(&e, 1), &logits); !s.ok()) return s;

  PolicyBenchResult r;
  const double observe_before = timed.seconds();
  std::vector<int32_t> last = {argmax()};
  for (int32_t i = 0; i < steps; ++i) {
    ForwardEntry d{&seq, last, prompt_len + i, false, policy};
    const double observed_before = timed.seconds();
    const int64_t evictions_before = (*compressor)->evictions();
    const auto t0 = Clock::now();
    if (absl::Status s = rt->backend()->Forward(std::span(&d, 1), &logits); !s.ok()) return s;
    const auto t1 = Clock::now();
    last = {argmax()};
    const auto t1b = Clock::now();
    (*compressor)->AfterDecodeStep(&seq, prompt_len + i + 1);
    const auto t2 = Clock::now();
    r.decode_s += std::chrono::duration<double>(t1 - t0).count();
    const double evict_s = std::chrono::duration<double>(t2 - t1b).count();
    r.evict_s += evict_s;
    r.per_step.AddStep(timed.seconds() - observed_before + evict_s, (*compressor)->evictions() - evictions_before);
  }
  r.steps = steps;
  r.observe_s = timed.seconds() - observe_before;
  r.evictions = (*compressor)->evictions();
  r.peak_slots = seq.peak_slots();
  seq.Release();
  return r;
}

}  // namespace beacon
