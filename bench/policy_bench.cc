#include "bench/policy_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "engine/generation.h"
#include "kv/policy/eviction_schedule.h"
#include "kv/policy/sequence_compressor.h"

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

absl::StatusOr<PolicyBenchResult> BenchPolicy(Runtime* rt, const KvPolicyOptions& options,
                                              const PolicyBenchShape& shape, bool policy_pool) {
  const ModelConfig& cfg = rt->config();
  const int32_t batch = shape.batch, steps = shape.steps;
  if (batch < 1 || shape.stagger < 0 || shape.prompt_len < 1 || steps < 1) {
    return absl::InvalidArgumentError("policy bench: batch, prompt length and steps must be >= 1, stagger >= 0");
  }
  const int32_t prompt_len = shape.prompt_len;
  std::vector<int32_t> pos(batch, prompt_len);  // each sequence's next position
  std::vector<std::vector<int32_t>> prompts(batch, std::vector<int32_t>(prompt_len));
  for (int32_t b = 0; b < batch; ++b) {
    for (int32_t i = 0; i < prompt_len; ++i) prompts[b][i] = (b * 131 + i * 31 + 7) % cfg.vocab_size;
  }
  std::vector<std::unique_ptr<SequenceCompressor>> compressors;
  int64_t slots = 16;
  for (int32_t b = 0; b < batch; ++b) {
    KvPolicyOptions o = options;
    if (shape.spread_phase && o.compresses())
      o.eviction_phase = EvictionSchedule::SpreadPhase(prompts[b], 0, 1, o.interval);
    auto made = SequenceCompressor::Create(o, PolicyInfoFor(cfg), prompt_len);
    if (!made.ok()) return made.status();
    if (policy_pool) (*made)->set_thread_pool(rt->backend()->host_pool());  // as serving does (GenerationEngine::Add)
    compressors.push_back(*std::move(made));
    slots += SequenceCompressor::PeakSlots(options, prompt_len, b * shape.stagger + steps + 1) + 16;
  }
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(slots);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  std::vector<SequenceKv> seqs;
  seqs.reserve(batch);
  std::vector<std::unique_ptr<TimedPolicy>> timed;
  std::vector<KvPolicy*> policies;
  for (int32_t b = 0; b < batch; ++b) {
    seqs.emplace_back(cache.get());
    timed.push_back(std::make_unique<TimedPolicy>(compressors[b]->policy()));
    policies.push_back(options.compresses() ? timed.back().get() : nullptr);
  }
  auto observed = [&] {
    double s = 0;
    for (const auto& t : timed) s += t->seconds();
    return s;
  };
  auto evictions = [&] {
    int64_t n = 0;
    for (const auto& c : compressors) n += c->evictions();
    return n;
  };

  std::vector<float> logits;
  auto argmax = [&](int32_t row) {
    const float* r = logits.data() + static_cast<size_t>(row) * cfg.vocab_size;
    return static_cast<int32_t>(std::max_element(r, r + cfg.vocab_size) - r);
  };
  std::vector<std::vector<int32_t>> last(batch);
  // Prefills and head starts, one sequence at a time (not timed).
  for (int32_t b = 0; b < batch; ++b) {
    ForwardEntry e{&seqs[b], prompts[b], 0, false, policies[b]};
    if (absl::Status s = rt->backend()->Forward(std::span(&e, 1), &logits); !s.ok()) return s;
    last[b] = {argmax(0)};
    for (int32_t j = 0; j < b * shape.stagger; ++j) {
      ForwardEntry d{&seqs[b], last[b], pos[b], false, policies[b]};
      if (absl::Status s = rt->backend()->Forward(std::span(&d, 1), &logits); !s.ok()) return s;
      last[b] = {argmax(0)};
      compressors[b]->AfterDecodeStep(&seqs[b], ++pos[b]);
    }
  }

  PolicyBenchResult r;
  const double observe_before = observed();
  const int64_t evictions_before_timing = evictions();
  std::vector<ForwardEntry> entries(batch);
  for (int32_t i = 0; i < steps; ++i) {
    for (int32_t b = 0; b < batch; ++b) entries[b] = ForwardEntry{&seqs[b], last[b], pos[b], false, policies[b]};
    const double observed_before = observed();
    const int64_t evictions_before = evictions();
    const auto t0 = Clock::now();
    if (absl::Status s = rt->backend()->Forward(entries, &logits); !s.ok()) return s;
    const auto t1 = Clock::now();
    for (int32_t b = 0; b < batch; ++b) last[b] = {argmax(b)};
    const auto t1b = Clock::now();
    for (int32_t b = 0; b < batch; ++b) compressors[b]->AfterDecodeStep(&seqs[b], ++pos[b]);
    const auto t2 = Clock::now();
    r.decode_s += std::chrono::duration<double>(t1 - t0).count();
    const double evict_s = std::chrono::duration<double>(t2 - t1b).count();
    r.evict_s += evict_s;
    const int64_t made_now = evictions() - evictions_before;
    r.per_step.AddStep(observed() - observed_before + evict_s, made_now);
    r.whole_step.AddStep(std::chrono::duration<double>(t2 - t0).count(), made_now);
  }
  r.steps = steps;
  r.observe_s = observed() - observe_before;
  r.evictions = evictions() - evictions_before_timing;
  for (SequenceKv& s : seqs) {
    r.peak_slots = std::max(r.peak_slots, s.peak_slots());
    s.Release();
  }
  return r;
}

}  // namespace beacon
