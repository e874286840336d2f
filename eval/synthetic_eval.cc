#include "eval/synthetic_eval.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "eval/metrics.h"
#include "eval/policy_grid.h"
#include "kernels/cpu/ops.h"
#include "kv/policy/sequence_compressor.h"
#include "kv/store/kv_cache.h"

namespace beacon::eval {
namespace {

constexpr int kBlockSize = 16;

// One (policy, budget) over one trace.
struct Run {
  size_t result;  // index into the results
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<SequenceKv> kv;
  std::unique_ptr<SequenceCompressor> compressor;
};

// Drives every run over one trace and adds to the accumulators.
absl::Status EvalTrace(const SyntheticTrace& trace, std::vector<Run>& runs, std::vector<Mean>& revisit,
                       std::vector<Mean>& all, std::vector<SyntheticResult>& results) {
  const SyntheticTraceOptions& o = trace.options;
  const int n = trace.n_tokens(), d = o.head_dim, group = o.n_heads / o.n_kv_heads;
  const TraceRope rope(o);
  // Every key rotated once, [pos][kv_head][d]: the full cache's view.
  std::vector<float> rk(trace.k.size());
  for (int pos = 0; pos < n; ++pos) {
    for (int h = 0; h < o.n_kv_heads; ++h) {
      rope.Apply(trace.key(pos, h), pos, &rk[(static_cast<size_t>(pos) * o.n_kv_heads + h) * d]);
    }
  }
  std::vector<float> rq(static_cast<size_t>(o.n_heads) * d);
  std::vector<float> full(static_cast<size_t>(o.n_heads) * n);  // [query head][position]
  std::vector<float> probs;                                     // [group][slots] of one run and KV head
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  for (int pos = 0; pos < n; ++pos) {
    const bool decode = pos >= o.prompt_len;
    for (int qh = 0; qh < o.n_heads; ++qh) rope.Apply(trace.query(pos, qh), pos, &rq[static_cast<size_t>(qh) * d]);
    if (decode) {
      for (int qh = 0; qh < o.n_heads; ++qh) {
        AttentionProbs(&rq[static_cast<size_t>(qh) * d], rk.data() + (qh / group) * d,
                       static_cast<size_t>(o.n_kv_heads) * d, pos + 1, d, &full[static_cast<size_t>(qh) * n]);
      }
    }
    for (Run& run : runs) {
      KvPolicy* policy = run.compressor->policy();
      SequenceKv& kv = *run.kv;
      policy->ObserveQuery(0, trace.query(pos, 0), pos);
      // Append this token's rotated keys (values are not needed: nothing
      // here reads attention outputs).
      const int32_t slot = kv.num_slots();
      if (absl::Status s = kv.Reserve(slot + 1); !s.ok()) return s;  // sized for the peak: a bug if it fails
      const int32_t block = kv.block_ids()[slot / kBlockSize];
      for (int h = 0; h < o.n_kv_heads; ++h) {
        std::copy_n(&rk[(static_cast<size_t>(pos) * o.n_kv_heads + h) * d], d,
                    run.cache->K(0, block, h) + (slot % kBlockSize) * d);
        run.cache->Positions(0, block, h)[slot % kBlockSize] = pos;
      }
      kv.CommitSlots(slot + 1);
      if (pos == o.prompt_len - 1) run.compressor->AfterDecodeStep(&kv, pos + 1);  // end of the prefill
      if (!decode) continue;

      const KeysView keys(run.cache.get(), &kv, 0);
      const int32_t n_slots = kv.num_slots();
      double step_recall = 0.0;
      for (int h = 0; h < o.n_kv_heads; ++h) {
        if (policy->wants_attention()) {
          probs.resize(static_cast<size_t>(group) * n_slots);
          for (int g = 0; g < group; ++g) {
            const float* q = &rq[static_cast<size_t>(h * group + g) * d];
            float* p = &probs[static_cast<size_t>(g) * n_slots];
            for (int32_t s = 0; s < n_slots; ++s) p[s] = Dot(q, keys.key(h, s), d) * scale;
            SoftmaxInPlace(p, n_slots);
          }
          policy->ObserveAttention(0, h, probs.data(), group, n_slots);
        }
        for (int g = 0; g < group; ++g) {
          const float* f = &full[static_cast<size_t>(h * group + g) * n];
          for (int32_t s = 0; s < n_slots; ++s) step_recall += f[keys.position(h, s)];
        }
      }
      step_recall /= o.n_heads;
      all[run.result].Add(step_recall);
      if (trace.kind[pos] == TokenKind::kRevisit) revisit[run.result].Add(step_recall);
      run.compressor->AfterDecodeStep(&kv, pos + 1);
    }
  }
  for (Run& run : runs) {
    const KeysView keys(run.cache.get(), run.kv.get(), 0);
    int64_t kept = 0;
    for (int h = 0; h < o.n_kv_heads; ++h) {
      for (int32_t s = 0; s < keys.n_slots(); ++s) {
        const int32_t p = keys.position(h, s);
        kept += p >= trace.plan_begin() && p < trace.plan_end();
      }
    }
    SyntheticResult& r = results[run.result];
    r.plan_kept_end += static_cast<double>(kept) / (static_cast<double>(o.plan_len) * o.n_kv_heads);
    r.peak_slots += run.kv->peak_slots();
    r.evictions += static_cast<double>(run.compressor->evictions());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<SyntheticResult>> RunSyntheticEval(const SyntheticEvalOptions& options,
                                                              const SyntheticProgress& progress) {
  if (absl::Status s = options.trace.Validate(); !s.ok()) return s;
  if (options.traces < 1) return absl::InvalidArgumentError("traces: must be >= 1");
  absl::StatusOr<std::vector<PolicySpec>> grid =
      MakePolicyGrid(options.policies, options.budgets, options.interval, options.beacon_prompt_queries);
  if (!grid.ok()) return grid.status();
  std::vector<SyntheticResult> results;
  for (const PolicySpec& spec : *grid) results.push_back(SyntheticResult{spec.policy, spec.budget});
  std::vector<Mean> revisit(results.size()), all(results.size());
  for (int t = 0; t < options.traces; ++t) {
    SyntheticTraceOptions to = options.trace;
    to.seed = options.trace.seed + static_cast<uint64_t>(t);
    const SyntheticTrace trace = GenerateSyntheticTrace(to);
    KvCacheShape shape;
    shape.n_layers = 1;
    shape.n_kv_heads = to.n_kv_heads;
    shape.head_dim = to.head_dim;
    shape.block_size = kBlockSize;
    std::vector<Run> runs;
    for (size_t i = 0; i < results.size(); ++i) {
      // The random policy draws from its seed: a fresh one per trace.
      KvPolicyOptions po = (*grid)[i].options;
      po.seed = to.seed;
      const int64_t peak = SequenceCompressor::PeakSlots(po, to.prompt_len, to.n_tokens() - to.prompt_len);
      Run run;
      run.result = i;
      run.cache = std::make_unique<KvCache>(shape, static_cast<int32_t>(peak / kBlockSize + 2));
      run.kv = std::make_unique<SequenceKv>(run.cache.get());
      absl::StatusOr<std::unique_ptr<SequenceCompressor>> c =
          SequenceCompressor::Create(po, trace.model_info(), to.prompt_len);
      if (!c.ok()) return c.status();
      run.compressor = std::move(*c);
      runs.push_back(std::move(run));
    }
    if (absl::Status s = EvalTrace(trace, runs, revisit, all, results); !s.ok()) return s;
    if (progress) progress(t + 1, options.traces);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    SyntheticResult& r = results[i];
    r.revisit_recall = revisit[i].value();
    r.revisit_queries = revisit[i].count();
    r.all_recall = all[i].value();
    r.plan_kept_end /= options.traces;
    r.peak_slots /= options.traces;
    r.evictions /= options.traces;
  }
  return results;
}

}  // namespace beacon::eval
