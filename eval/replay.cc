#include "eval/replay.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "engine/generation.h"
#include "eval/replay_batch.h"

namespace beacon::eval {
namespace {

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

absl::StatusOr<ReplayResult> RunReplay(Runtime* rt, const std::vector<int32_t>& prompt,
                                       const std::vector<int32_t>& trace, std::span<const PolicySpec> specs,
                                       int32_t prefill_chunk, const StepProgress& progress) {
  const PolicyModelInfo info = PolicyInfoFor(rt->config());
  const int32_t n_trace = static_cast<int32_t>(trace.size());
  if (n_trace < 2) return absl::InvalidArgumentError("trace: needs >= 2 tokens");
  // The trace forced into every entry; one more token allowed, so that no
  // entry finishes (and frees its KV) at the last step measured.
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made = ReplayBatch::Create(rt, prompt, trace, n_trace + 1, specs);
  if (!made.ok()) return made.status();
  ReplayBatch& batch = **made;
  if (absl::Status s = batch.Prefill(prefill_chunk); !s.ok()) return s;

  ReplayResult result;
  result.reference_mismatches += ArgMax(batch.logits(0)) != trace[0];
  result.stats.resize(specs.size());
  std::vector<std::vector<uint8_t>> agrees(specs.size());  // per step: the greedy choice == the next trace token
  SoftmaxRef ref;
  std::vector<std::vector<int32_t>> scratch(rt->pool()->n_threads());
  std::vector<int64_t> evictions_before(specs.size());
  for (int32_t t = 0; t + 1 < n_trace; ++t) {
    // Step t feeds trace[t]; its logits predict trace[t + 1].
    auto measure = [&] {
      const std::span<const float> p_logits = batch.logits(0);
      ref.Set(p_logits);
      const int32_t ref_top = ArgMax(p_logits);
      result.reference_mismatches += ref_top != trace[t + 1];
      // Metrics of the replays are independent of each other: spread them
      // over the pool (the backend is idle now).
      rt->pool()->ParallelFor(static_cast<int64_t>(specs.size()), 1, [&](int64_t begin, int64_t end, int thread) {
        for (int64_t i = begin; i < end; ++i) {
          const std::span<const float> q_logits = batch.logits(i + 1);
          ReplayStats& st = result.stats[i];
          const double kl = ref.KlTo(q_logits);
          const int32_t top = ArgMax(q_logits);
          const double recall = AttentionRecall(batch.recorder(), batch.kv(i), info, &scratch[thread]);
          st.kl.Add(kl);
          st.top1.Add(top == ref_top ? 1.0 : 0.0);
          st.recall.Add(recall);
          if (batch.compressor(i).evictions() > 0) {
            st.kl_post.Add(kl);
            st.top1_post.Add(top == ref_top ? 1.0 : 0.0);
            st.recall_post.Add(recall);
          }
          agrees[i].push_back(top == trace[t + 1] ? 1 : 0);
        }
      });
      for (size_t i = 0; i < specs.size(); ++i) evictions_before[i] = batch.compressor(i).evictions();
    };
    if (absl::Status s = batch.Step(measure); !s.ok()) return s;  // then each entry evicts as it is due
    for (size_t i = 0; i < specs.size(); ++i) {
      const int w = specs[i].twin;
      if (w < 0) continue;
      if (batch.compressor(i).evictions() == evictions_before[i] &&
          batch.compressor(w).evictions() == evictions_before[w]) {
        continue;
      }
      result.stats[i].kept_jaccard.Add(KeptJaccard(batch.kv(i), batch.kv(w), info));
    }
    if (progress) progress(t + 1, n_trace - 1, static_cast<int>(specs.size() + 1));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    ReplayStats& st = result.stats[i];
    st.agreement = 1 + LeadingAgreement(agrees[i]);
    st.peak_slots = batch.kv(i).peak_slots();
    st.evictions = batch.compressor(i).evictions();
  }
  return result;
}

}  // namespace beacon::eval
