#include "eval/model_eval.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "eval/free_run.h"
#include "eval/model_checkpoint.h"
#include "eval/policy_grid.h"
#include "eval/replay.h"

namespace beacon::eval {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Progress lines with an ETA. Work is counted in "replay-step equivalents":
// a replay step runs every configuration; a pass-1 step runs only the
// configurations that still agree, which measured about a third of the
// cost on average (the batch shrinks as configurations diverge).
class Progress {
 public:
  Progress(std::FILE* log, int n_prompts, int32_t steps_per_pass)
      : log_(log), total_(n_prompts * steps_per_pass * (kPass1Weight + 1.0)), t0_(Clock::now()) {}

  void Report(int prompt, int n_prompts, const char* pass, int32_t step, int32_t steps, int batch, double done_units) {
    const double elapsed = Since(t0_);
    // At most one line every 5 seconds, and the last step of each pass.
    if (step != steps && elapsed - last_ < 5.0) return;
    last_ = elapsed;
    const double eta = done_units > 0 ? elapsed / done_units * (total_ - done_units) : 0.0;
    std::fprintf(log_, "[model] prompt %d/%d  %s step %d/%d  batch %d  elapsed %.0fs  ETA %.0fs\n", prompt, n_prompts,
                 pass, step, steps, batch, elapsed, eta);
    std::fflush(log_);
  }
  static constexpr double kPass1Weight = 1.0 / 3.0;

 private:
  std::FILE* log_;
  double total_;
  Clock::time_point t0_;
  double last_ = -1e9;
};

// One prompt's result for one configuration. "post" metrics are NaN when
// the configuration never evicted on this prompt.
ModelResult ResultOf(const PolicySpec& spec, const ReplayStats& st, int32_t agreement) {
  auto post = [](const Mean& m) { return m.count() > 0 ? m.value() : std::nan(""); };
  return ModelResult{spec.policy,
                     spec.budget,
                     st.kl.value(),
                     st.top1.value(),
                     st.recall.value(),
                     post(st.kl_post),
                     post(st.top1_post),
                     post(st.recall_post),
                     static_cast<double>(agreement),
                     static_cast<double>(st.peak_slots),
                     static_cast<double>(st.evictions),
                     static_cast<double>(st.kl_post.count()),
                     post(st.kept_jaccard)};
}

// The mean of configuration c's results over prompts, each prompt weighing
// the same; a "post" metric averages the prompts that have it (NaN if none).
ModelResult MeanOverPrompts(const std::vector<PromptSummary>& prompts, size_t c) {
  ModelResult out = prompts.front().results[c];
  double ModelResult::*fields[] = {&ModelResult::kl,         &ModelResult::top1,        &ModelResult::recall,
                                   &ModelResult::kl_post,    &ModelResult::top1_post,   &ModelResult::recall_post,
                                   &ModelResult::agreement,  &ModelResult::peak_slots,  &ModelResult::evictions,
                                   &ModelResult::post_steps, &ModelResult::kept_jaccard};
  for (double ModelResult::*f : fields) {
    Mean m;
    for (const PromptSummary& p : prompts) {
      if (!std::isnan(p.results[c].*f)) m.Add(p.results[c].*f);
    }
    out.*f = m.count() > 0 ? m.value() : std::nan("");
  }
  return out;
}

}  // namespace

double DistinctNgramRatio(const std::vector<int32_t>& ids, int n) {
  if (static_cast<int>(ids.size()) < n) return 1.0;
  std::set<std::vector<int32_t>> seen;
  const size_t total = ids.size() - n + 1;
  for (size_t i = 0; i < total; ++i) seen.emplace(ids.begin() + i, ids.begin() + i + n);
  return static_cast<double>(seen.size()) / static_cast<double>(total);
}

absl::StatusOr<ModelEvalReport> RunModelEval(Runtime* rt, const std::vector<EvalPrompt>& prompts,
                                             const ModelEvalOptions& options, std::FILE* log) {
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid(
      options.policies, options.budgets, options.interval, options.beacon_prompt_queries, options.beacon_bf16_state);
  if (!grid.ok()) return grid.status();
  if (rt->tokenizer() == nullptr) return absl::FailedPreconditionError("the model has no tokenizer");
  if (prompts.empty()) return absl::InvalidArgumentError("prompts: none given");
  // Encode (and so check) every prompt before the long work starts.
  std::vector<std::vector<int32_t>> encoded;
  for (const EvalPrompt& p : prompts) {
    absl::StatusOr<std::vector<int32_t>> ids = rt->EncodePrompt(p.prompt, /*chat=*/true, p.system);
    if (!ids.ok()) return ids.status();
    if (static_cast<int64_t>(ids->size()) + options.tokens > rt->config().context_length) {
      return absl::InvalidArgumentError(absl::StrCat("prompt '", p.id, "' (", ids->size(), " tokens) + --tokens ",
                                                     options.tokens, " exceeds the model's context ",
                                                     rt->config().context_length));
    }
    encoded.push_back(std::move(*ids));
  }

  // Checkpoints first, so that the progress ETA counts only what runs.
  const int n = static_cast<int>(prompts.size());
  std::vector<nlohmann::json> keys(n);
  std::vector<std::optional<PromptSummary>> saved(n);
  for (int i = 0; i < n; ++i) {
    keys[i] = options.checkpoint_key;
    keys[i]["tokens"] = options.tokens;
    keys[i]["interval"] = options.interval;
    keys[i]["prefill_chunk"] = options.prefill_chunk;
    keys[i]["prompt"] = prompts[i].prompt;
    keys[i]["system"] = prompts[i].system;
    for (const PolicySpec& spec : *grid)
      keys[i]["configurations"].push_back(absl::StrCat(spec.policy, "@", spec.budget));
    if (options.checkpoint_dir.empty() || !options.resume) continue;
    absl::StatusOr<std::optional<PromptSummary>> s = LoadCheckpoint(options.checkpoint_dir, prompts[i].id, keys[i]);
    if (!s.ok()) return s.status();
    saved[i] = std::move(*s);
  }
  int to_run = 0;
  for (const std::optional<PromptSummary>& s : saved) to_run += s.has_value() ? 0 : 1;

  const Clock::time_point t0 = Clock::now();
  Progress progress(log, to_run, options.tokens);
  ModelEvalReport report;
  int ran = 0;  // prompts computed so far (the progress counts only these)
  for (int i = 0; i < n; ++i) {
    if (saved[i].has_value()) {
      std::fprintf(log, "[model] prompt %d/%d '%s': reused from %s\n", i + 1, n, prompts[i].id.c_str(),
                   options.checkpoint_dir.c_str());
      saved[i]->reused = true;
      report.prompts.push_back(std::move(*saved[i]));
      continue;
    }
    PromptSummary summary;
    summary.id = prompts[i].id;
    summary.prompt_tokens = static_cast<int32_t>(encoded[i].size());
    const double base = ran * options.tokens * (Progress::kPass1Weight + 1.0);
    std::fprintf(log, "[model] prompt %d/%d '%s': %d prompt tokens, T=%d, %zu configurations\n", i + 1, n,
                 summary.id.c_str(), summary.prompt_tokens, options.tokens, grid->size());

    Clock::time_point tp = Clock::now();
    absl::StatusOr<FreeRunResult> free_run = RunTraceAndFreeRuns(
        rt, encoded[i], *grid, options.tokens, options.prefill_chunk, [&](int32_t step, int32_t steps, int batch) {
          progress.Report(ran + 1, to_run, "trace+free-run", step, steps, batch, base + step * Progress::kPass1Weight);
        });
    if (!free_run.ok()) return free_run.status();
    summary.trace_seconds = Since(tp);

    tp = Clock::now();
    const double base2 = base + options.tokens * Progress::kPass1Weight;
    absl::StatusOr<ReplayResult> replay = RunReplay(
        rt, encoded[i], free_run->trace, *grid, options.prefill_chunk, [&](int32_t step, int32_t steps, int batch) {
          progress.Report(ran + 1, to_run, "replay", step, steps, batch, base2 + step);
        });
    if (!replay.ok()) return replay.status();
    summary.replay_seconds = Since(tp);
    summary.reference_mismatches = replay->reference_mismatches;
    summary.distinct_4grams = DistinctNgramRatio(free_run->trace, 4);
    summary.text = rt->tokenizer()->Decode(free_run->trace);

    for (size_t c = 0; c < grid->size(); ++c) {
      const ReplayStats& st = replay->stats[c];
      if (st.agreement != free_run->agreement[c]) {
        ++summary.agreement_mismatches;
        std::fprintf(log, "[model] note: %s@%d free-run agreement %d != replay-derived %d\n", (*grid)[c].policy.c_str(),
                     (*grid)[c].budget, free_run->agreement[c], st.agreement);
      }
      summary.results.push_back(ResultOf((*grid)[c], st, free_run->agreement[c]));
    }
    std::fprintf(log, "[model] prompt %d/%d done: trace %.0fs, replay %.0fs, distinct 4-grams %.2f\n", i + 1, n,
                 summary.trace_seconds, summary.replay_seconds, summary.distinct_4grams);
    if (!options.checkpoint_dir.empty()) {
      if (absl::Status s = SaveCheckpoint(options.checkpoint_dir, keys[i], summary); !s.ok()) return s;
    }
    ++ran;
    report.prompts.push_back(std::move(summary));
  }
  for (size_t c = 0; c < grid->size(); ++c) report.results.push_back(MeanOverPrompts(report.prompts, c));
  report.seconds = Since(t0);
  return report;
}

}  // namespace beacon::eval
