#include "eval/replay.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "engine/generation.h"
#include "eval/recording_policy.h"
#include "kv/sequence_compressor.h"

namespace beacon::eval {
namespace {

// A teacher-forced replay of one configuration.
struct Replay {
  std::unique_ptr<SequenceKv> kv;
  std::unique_ptr<SequenceCompressor> compressor;
  std::vector<uint8_t> agrees;  // per step: 1 when the greedy choice == the next trace token
};

// The Jaccard index of the kept positions of a and b per (layer, KV head),
// averaged.
double KeptJaccard(const SequenceKv& a, const SequenceKv& b, const PolicyModelInfo& m) {
  std::vector<int32_t> pa, pb, both;
  double sum = 0.0;
  for (int l = 0; l < m.n_layers; ++l) {
    const KeysView ka(a.cache(), &a, l), kb(b.cache(), &b, l);
    for (int h = 0; h < m.n_kv_heads; ++h) {
      pa.resize(ka.n_slots());
      pb.resize(kb.n_slots());
      for (int32_t s = 0; s < ka.n_slots(); ++s) pa[s] = ka.position(h, s);
      for (int32_t s = 0; s < kb.n_slots(); ++s) pb[s] = kb.position(h, s);
      std::sort(pa.begin(), pa.end());
      std::sort(pb.begin(), pb.end());
      both.clear();
      std::set_intersection(pa.begin(), pa.end(), pb.begin(), pb.end(), std::back_inserter(both));
      const double uni = static_cast<double>(pa.size() + pb.size() - both.size());
      sum += uni > 0 ? static_cast<double>(both.size()) / uni : 1.0;
    }
  }
  return sum / (static_cast<double>(m.n_layers) * m.n_kv_heads);
}

}  // namespace

absl::Status PrefillTogether(Backend* backend, std::span<const int32_t> prompt, int32_t prefill_chunk,
                             std::span<ForwardEntry> entries, std::vector<float>* logits) {
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  for (int32_t done = 0; done < n_prompt;) {
    const int32_t n = std::min(prefill_chunk, n_prompt - done);
    for (ForwardEntry& e : entries) {
      e.tokens = prompt.subspan(done, n);
      e.start_pos = done;
    }
    if (absl::Status s = backend->Forward(entries, logits); !s.ok()) return s;
    done += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplayResult> RunReplay(Runtime* rt, const std::vector<int32_t>& prompt,
                                       const std::vector<int32_t>& trace, std::span<const PolicySpec> specs,
                                       int32_t prefill_chunk, const StepProgress& progress) {
  const ModelConfig& cfg = rt->config();
  const PolicyModelInfo info = PolicyInfoFor(cfg);
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  const int32_t n_trace = static_cast<int32_t>(trace.size());
  if (n_trace < 2) return absl::InvalidArgumentError("trace: needs >= 2 tokens");

  int64_t slots = n_prompt + n_trace + 16;
  for (const PolicySpec& s : specs) slots += SequenceCompressor::PeakSlots(s.options, n_prompt, n_trace) + 16;
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(slots);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  SequenceKv ref_kv(cache.get());
  RecordingPolicy recorder(info);
  std::vector<Replay> replays(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    replays[i].kv = std::make_unique<SequenceKv>(cache.get());
    absl::StatusOr<std::unique_ptr<SequenceCompressor>> c =
        SequenceCompressor::Create(specs[i].options, info, n_prompt);
    if (!c.ok()) return c.status();
    replays[i].compressor = std::move(*c);
    replays[i].compressor->set_thread_pool(rt->backend()->host_pool());
  }
  // Entry 0 is the reference, entry i + 1 replays specs[i].
  std::vector<ForwardEntry> entries(specs.size() + 1);
  entries[0].kv = &ref_kv;
  entries[0].policy = &recorder;
  for (size_t i = 0; i < specs.size(); ++i) {
    entries[i + 1].kv = replays[i].kv.get();
    entries[i + 1].policy = replays[i].compressor->policy();
  }
  std::vector<float> logits;

  // Prefill, in chunks; then, as Generation does once the first token is
  // sampled, AfterDecodeStep (no eviction: the prompt is within any bound).
  if (absl::Status s = PrefillTogether(rt->backend(), prompt, prefill_chunk, entries, &logits); !s.ok()) return s;
  for (Replay& r : replays) r.compressor->AfterDecodeStep(r.kv.get(), n_prompt);

  ReplayResult result;
  result.reference_mismatches += ArgMax(std::span<const float>(logits.data(), cfg.vocab_size)) != trace[0];
  result.stats.resize(specs.size());
  const size_t vocab = static_cast<size_t>(cfg.vocab_size);
  SoftmaxRef ref;
  std::vector<std::vector<int32_t>> scratch(rt->pool()->n_threads());
  for (int32_t t = 0; t + 1 < n_trace; ++t) {
    const int32_t pos = n_prompt + t;
    for (ForwardEntry& e : entries) {
      e.tokens = std::span<const int32_t>(trace).subspan(t, 1);
      e.start_pos = pos;
    }
    if (absl::Status s = rt->backend()->Forward(entries, &logits); !s.ok()) return s;
    const std::span<const float> p_logits(logits.data(), vocab);
    ref.Set(p_logits);
    const int32_t ref_top = ArgMax(p_logits);
    result.reference_mismatches += ref_top != trace[t + 1];
    // Metrics of the replays are independent of each other: spread them
    // over the pool (the backend is idle now).
    rt->pool()->ParallelFor(static_cast<int64_t>(specs.size()), 1, [&](int64_t begin, int64_t end, int thread) {
      for (int64_t i = begin; i < end; ++i) {
        const std::span<const float> q_logits(logits.data() + (i + 1) * vocab, vocab);
        Replay& r = replays[i];
        ReplayStats& st = result.stats[i];
        const double kl = ref.KlTo(q_logits);
        const int32_t top = ArgMax(q_logits);
        const double recall = AttentionRecall(recorder, *r.kv, info, &scratch[thread]);
        st.kl.Add(kl);
        st.top1.Add(top == ref_top ? 1.0 : 0.0);
        st.recall.Add(recall);
        if (r.compressor->evictions() > 0) {
          st.kl_post.Add(kl);
          st.top1_post.Add(top == ref_top ? 1.0 : 0.0);
          st.recall_post.Add(recall);
        }
        r.agrees.push_back(top == trace[t + 1] ? 1 : 0);
      }
    });
    // Eviction returns blocks to the shared pool: one sequence at a time.
    std::vector<int64_t> evictions_before(replays.size());
    for (size_t i = 0; i < replays.size(); ++i) {
      evictions_before[i] = replays[i].compressor->evictions();
      replays[i].compressor->AfterDecodeStep(replays[i].kv.get(), pos + 1);
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      const int w = specs[i].twin;
      if (w < 0) continue;
      if (replays[i].compressor->evictions() == evictions_before[i] &&
          replays[w].compressor->evictions() == evictions_before[w]) {
        continue;
      }
      result.stats[i].kept_jaccard.Add(KeptJaccard(*replays[i].kv, *replays[w].kv, info));
    }
    if (progress) progress(t + 1, n_trace - 1, static_cast<int>(entries.size()));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    ReplayStats& st = result.stats[i];
    st.agreement = 1 + LeadingAgreement(replays[i].agrees);
    st.peak_slots = replays[i].kv->peak_slots();
    st.evictions = replays[i].compressor->evictions();
  }
  return result;
}

}  // namespace beacon::eval
