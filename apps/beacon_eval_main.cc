// beacon-eval: fidelity of the KV eviction policies against the full cache
// (docs/fidelity.md).
//
//   beacon-eval model [--model models/default.gguf] [--prompts eval/prompts/long_prompts.jsonl]
//                     [--tokens 2048] [--kv-policy streaming,h2o,snapkv,rkv,random,beacon]
//                     [--kv-budget 128,256,512,1024] [--kv-interval 128] [--out-dir build/eval]
//                     [--threads N] [--max-prompts N] [--kv-beacon-prompt-queries true|false|true,false]
//   beacon-eval synthetic [--kv-budget 64,128,256,512] [--kv-policy ...] [--seed S]
//                         [--traces 4] [--middle 2000] [--out-dir build/eval]
//                         [--kv-beacon-prompt-queries true|false|true,false]
//   beacon-eval needle [--model models/default.gguf] [--distances 256,1024,2048]
//                      [--kv-budget 64,128,256,512,1024] [--kv-policy ...] [--cases 20] [--seed 1]
//                      [--kv-interval 128] [--out-dir build/eval] [--threads N]
//   beacon-eval revisit [--model models/qwen2.5-coder-1.5b.gguf] [--kv-policy ...] [--kv-budget 64,128]
//                       [--kv-interval 16] [--cases 10] [--seed 1] [--facts 6] [--revisited 3]
//                       [--revisits-per-fact 3] [--steps 14] [--out-dir build/eval] [--threads N]
//   beacon-eval revisit-steps [--from eval/results/fidelity-T2048] [--model models/default.gguf]
//                       [--kv-policy ...] [--kv-budget 128,256] [--threshold 0.1,0.2] [--min-distinct 0.1]
//                       [--out-dir build/eval] [--threads N]
//
// model and synthetic write OUT/{model,synthetic}_results.{csv,md,json} and,
// model also OUT/model_{per_prompt,comparison}.csv and OUT/prompts/<id>.json
// (eval/model_report.h, eval/model_checkpoint.h); both write,
// through tools/plot_fidelity.py (matplotlib), OUT/{model,synthetic}_fidelity.png;
// needle writes OUT/needle_{raw,calibration}.csv and
// OUT/needle_summary.{csv,md,json} (eval/needle.h), rewritten after every
// case so that a run stopped early leaves consistent partial results;
// revisit writes OUT/revisit.{md,json} (eval/revisit.h), likewise after
// every case; revisit-steps OUT/revisit_steps.{md,json} (eval/revisit_steps.h)
// after every trace.
// Progress goes to stderr.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "eval/model_checkpoint.h"
#include "eval/model_eval.h"
#include "eval/model_report.h"
#include "eval/needle.h"
#include "eval/needle_report.h"
#include "eval/policy_grid.h"
#include "eval/report.h"
#include "eval/revisit.h"
#include "eval/revisit_report.h"
#include "eval/revisit_steps.h"
#include "eval/synthetic_eval.h"
#include "kv/policy/policy_registry.h"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "beacon-eval: %s\n", std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// The --model runtime for commands that need a tokenizer (`what`: what it
// could not run without one).
absl::StatusOr<std::unique_ptr<Runtime>> LoadRuntime(const cli::Args& args, int threads, const char* what) {
  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.threads = threads;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) return rt.status();
  if ((*rt)->tokenizer() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("model ", ro.model, " has no tokenizer: it cannot run ", what));
  }
  return rt;
}

std::vector<std::string> ParseList(const cli::Args& args, const std::string& flag) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(args.Str(flag), ',', absl::SkipEmpty())) out.emplace_back(p);
  return out;
}

// --kv-beacon-prompt-queries: true, false or both ("true,false"; on/off are
// accepted too), one beacon configuration per value; absent, beacon runs at
// its default.
absl::StatusOr<std::vector<bool>> ParsePromptQueries(const cli::Args& args) {
  std::vector<bool> out;
  if (!args.Has("kv-beacon-prompt-queries")) return out;
  for (const std::string& v : ParseList(args, "kv-beacon-prompt-queries")) {
    absl::StatusOr<bool> b = cli::ParseBool(v);
    if (!b.ok()) return absl::InvalidArgumentError("--kv-beacon-prompt-queries must be true, false or true,false");
    out.push_back(*b);
  }
  if (out.empty()) return absl::InvalidArgumentError("--kv-beacon-prompt-queries: empty");
  return out;
}

// For the settings: "on,off" as given, or the default's value.
std::string PromptQueriesSetting(const std::vector<bool>& values) {
  if (values.empty()) return KvPolicyOptions().beacon_prompt_queries ? "on" : "off";
  std::string out;
  for (bool v : values) out += std::string(out.empty() ? "" : ",") + (v ? "on" : "off");
  return out;
}

// Writes the three result files and the plot; a failed plot is a warning.
int Finish(const cli::Args& args, const eval::ResultTable& table, const std::string& markdown,
           const nlohmann::json& settings, const std::string& stem, const std::string& title) {
  const std::string dir = args.Str("out-dir");
  if (absl::Status s = eval::WriteResults(table, markdown, settings, dir, absl::StrCat(stem, "_results")); !s.ok()) {
    return Fail(s);
  }
  std::printf("%s", markdown.c_str());
  std::fprintf(stderr, "beacon-eval: wrote %s/%s_results.{csv,md,json}\n", dir.c_str(), stem.c_str());
  if (args.Flag("plot")) {
    const std::string png = absl::StrCat(dir, "/", stem, "_fidelity.png");
    absl::Status s = eval::RunPlot(args.Str("plot-script"), absl::StrCat(dir, "/", stem, "_results.csv"), png, title);
    if (s.ok()) {
      std::fprintf(stderr, "beacon-eval: wrote %s\n", png.c_str());
    } else {
      std::fprintf(stderr, "beacon-eval: warning: %s\n", std::string(s.message()).c_str());
    }
  }
  return 0;
}

int Model(const cli::Args& args) {
  eval::ModelEvalOptions o;
  absl::StatusOr<std::vector<int32_t>> budgets = args.PositiveIntList("kv-budget");
  if (!budgets.ok()) return Fail(budgets.status());
  o.budgets = *budgets;
  o.policies = ParseList(args, "kv-policy");
  absl::StatusOr<std::vector<bool>> pq = ParsePromptQueries(args);
  if (!pq.ok()) return Fail(pq.status());
  o.beacon_prompt_queries = *pq;
  for (const std::string& v : ParseList(args, "kv-beacon-state")) {
    if (v != "f32" && v != "bf16")
      return Fail(absl::InvalidArgumentError("--kv-beacon-state must be f32, bf16 or f32,bf16"));
    o.beacon_bf16_state.push_back(v == "bf16");
  }
  absl::StatusOr<int64_t> tokens = args.Int("tokens"), interval = args.Int("kv-interval"),
                          threads = args.Int("threads"), max_prompts = args.Int("max-prompts");
  for (const absl::Status& s : {tokens.status(), interval.status(), threads.status(), max_prompts.status()}) {
    if (!s.ok()) return Fail(s);
  }
  if (*tokens < 2) return Fail(absl::InvalidArgumentError("--tokens must be >= 2"));
  if (*interval < 1) return Fail(absl::InvalidArgumentError("--kv-interval must be >= 1"));
  if (*max_prompts < 0) return Fail(absl::InvalidArgumentError("--max-prompts must be >= 0 (0 = all)"));
  o.tokens = static_cast<int32_t>(*tokens);
  o.interval = static_cast<int32_t>(*interval);

  // Bad grids fail before the model loads.
  if (absl::StatusOr<std::vector<eval::PolicySpec>> g =
          eval::MakePolicyGrid(o.policies, o.budgets, o.interval, o.beacon_prompt_queries, o.beacon_bf16_state);
      !g.ok()) {
    return Fail(g.status());
  }
  absl::StatusOr<std::vector<eval::EvalPrompt>> prompts = eval::LoadPrompts(args.Str("prompts"));
  if (!prompts.ok()) return Fail(prompts.status());
  if (*max_prompts > 0 && static_cast<size_t>(*max_prompts) < prompts->size()) prompts->resize(*max_prompts);

  const std::string model = args.Str("model");
  absl::StatusOr<std::unique_ptr<Runtime>> rt = LoadRuntime(args, static_cast<int>(*threads), "chat prompts");
  if (!rt.ok()) return Fail(rt.status());
  o.checkpoint_dir = absl::StrCat(args.Str("out-dir"), "/prompts");
  o.resume = args.Flag("resume");
  o.checkpoint_key = {{"model", model}, {"kv_cache_dtype", KvCacheDTypeName((*rt)->kv_cache_dtype())}};
  absl::StatusOr<eval::ModelEvalReport> report = eval::RunModelEval(rt->get(), *prompts, o, stderr);
  if (!report.ok()) return Fail(report.status());

  nlohmann::json settings = {{"model", model},
                             {"prompts_file", args.Str("prompts")},
                             {"tokens", o.tokens},
                             {"interval", o.interval},
                             {"threads", (*rt)->pool()->n_threads()},
                             {"kv_cache_dtype", o.checkpoint_key["kv_cache_dtype"]},
                             {"seconds", report->seconds},
                             {"beacon_prompt_queries", PromptQueriesSetting(o.beacon_prompt_queries)}};
  for (const eval::PromptSummary& p : report->prompts) settings["prompts"].push_back(eval::PromptSummaryToJson(p));
  eval::ModelReportOptions ro;
  ro.subject = args.Str("subject");
  const eval::ModelReportTables tables = eval::BuildModelReport(
      *report, ro,
      absl::StrFormat("model %s, %d prompts, T=%d generated tokens each, interval %d, KV cache %s, %.0f s", model,
                      report->prompts.size(), o.tokens, o.interval,
                      o.checkpoint_key["kv_cache_dtype"].get<std::string>(), report->seconds));
  const std::string dir = args.Str("out-dir");
  for (const auto& [stem, table] :
       {std::pair{"model_per_prompt", &tables.per_prompt}, std::pair{"model_comparison", &tables.comparison}}) {
    if (absl::Status s = eval::WriteCsv(*table, absl::StrCat(dir, "/", stem, ".csv")); !s.ok()) return Fail(s);
  }
  return Finish(args, tables.summary, tables.markdown, settings, "model",
                absl::StrFormat("%s: %d prompts, T=%d", model, report->prompts.size(), o.tokens));
}

int Synthetic(const cli::Args& args) {
  eval::SyntheticEvalOptions o;
  absl::StatusOr<std::vector<int32_t>> budgets = args.PositiveIntList("kv-budget");
  if (!budgets.ok()) return Fail(budgets.status());
  o.budgets = *budgets;
  o.policies = ParseList(args, "kv-policy");
  absl::StatusOr<std::vector<bool>> pq = ParsePromptQueries(args);
  if (!pq.ok()) return Fail(pq.status());
  o.beacon_prompt_queries = *pq;
  absl::StatusOr<int64_t> seed = args.Int("seed"), traces = args.Int("traces"), middle = args.Int("middle"),
                          interval = args.Int("kv-interval");
  for (const absl::Status& s : {seed.status(), traces.status(), middle.status(), interval.status()}) {
    if (!s.ok()) return Fail(s);
  }
  if (*traces < 1) return Fail(absl::InvalidArgumentError("--traces must be >= 1"));
  if (*interval < 1) return Fail(absl::InvalidArgumentError("--kv-interval must be >= 1"));
  o.traces = static_cast<int>(*traces);
  o.interval = static_cast<int32_t>(*interval);
  o.trace.seed = static_cast<uint64_t>(*seed);
  o.trace.middle_len = static_cast<int>(*middle);
  absl::StatusOr<std::vector<eval::SyntheticResult>> results =
      eval::RunSyntheticEval(o, [](int t, int n) { std::fprintf(stderr, "[synthetic] trace %d/%d done\n", t, n); });
  if (!results.ok()) return Fail(results.status());

  eval::ResultTable table({{"policy", "policy", 0},
                           {"budget", "budget", 0},
                           {"revisit_recall", "revisit recall", 3},
                           {"all_recall", "all-query recall", 3},
                           {"plan_kept_end", "plan kept at end", 3},
                           {"peak_slots", "peak slots", 0},
                           {"evictions", "evictions", 1},
                           {"revisit_queries", "revisit queries", 0}});
  for (const eval::SyntheticResult& r : *results) {
    table.AddRow({r.policy, static_cast<double>(r.budget), r.revisit_recall, r.all_recall, r.plan_kept_end,
                  r.peak_slots, r.evictions, static_cast<double>(r.revisit_queries)});
  }
  const eval::SyntheticTraceOptions& t = o.trace;
  const nlohmann::json settings = {{"seed", t.seed},
                                   {"traces", o.traces},
                                   {"beacon_prompt_queries", PromptQueriesSetting(o.beacon_prompt_queries)},
                                   {"interval", o.interval},
                                   {"n_heads", t.n_heads},
                                   {"n_kv_heads", t.n_kv_heads},
                                   {"head_dim", t.head_dim},
                                   {"rope_theta", t.rope_theta},
                                   {"prompt_len", t.prompt_len},
                                   {"plan_len", t.plan_len},
                                   {"plan_steps", t.plan_steps},
                                   {"middle_len", t.middle_len},
                                   {"segment_len", t.segment_len},
                                   {"revisit_every", t.revisit_every},
                                   {"plan_logit", t.plan_logit},
                                   {"work_logit", t.work_logit},
                                   {"noise", t.noise}};
  std::string md = absl::StrFormat(
      "# beacon-eval synthetic\n\n%d traces (seeds %d..%d): prompt %d, plan %d, middle %d tokens; "
      "%d query / %d KV heads, head dim %d, rope theta %g; interval %d\n",
      o.traces, t.seed, t.seed + o.traces - 1, t.prompt_len, t.plan_len, t.middle_len, t.n_heads, t.n_kv_heads,
      t.head_dim, t.rope_theta, o.interval);
  absl::StrAppend(&md, "\n## Revisit recall\n\n", table.PivotMarkdown("policy", "budget", "revisit_recall"),
                  "\n## All-query recall\n\n", table.PivotMarkdown("policy", "budget", "all_recall"),
                  "\n## Plan keys kept at the end\n\n", table.PivotMarkdown("policy", "budget", "plan_kept_end"),
                  "\n## All metrics\n\n", table.ToMarkdown());
  return Finish(args, table, md, settings, "synthetic",
                absl::StrFormat("synthetic revisiting traces: %d traces, %d tokens", o.traces, t.n_tokens()));
}

// Writes `text` to dir/name. INTERNAL naming the file when it cannot.
absl::Status WriteText(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(dir, "/", name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f.good()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

int Needle(const cli::Args& args) {
  eval::NeedleOptions o;
  absl::StatusOr<std::vector<int32_t>> budgets = args.PositiveIntList("kv-budget"),
                                       distances = args.PositiveIntList("distances");
  if (!budgets.ok()) return Fail(budgets.status());
  if (!distances.ok()) return Fail(distances.status());
  o.budgets = *budgets;
  o.distances = *distances;
  // The full cache always runs (it is the calibration): "full" in the list
  // is accepted and needs nothing more.
  for (const std::string& p : ParseList(args, "kv-policy")) {
    if (p != "full") o.policies.push_back(p);
  }
  absl::StatusOr<int64_t> cases = args.Int("cases"), seed = args.Int("seed"), interval = args.Int("kv-interval"),
                          threads = args.Int("threads"), resamples = args.Int("resamples");
  for (const absl::Status& s :
       {cases.status(), seed.status(), interval.status(), threads.status(), resamples.status()}) {
    if (!s.ok()) return Fail(s);
  }
  if (*cases < 1) return Fail(absl::InvalidArgumentError("--cases must be >= 1"));
  if (*interval < 1) return Fail(absl::InvalidArgumentError("--kv-interval must be >= 1"));
  if (*resamples < 1) return Fail(absl::InvalidArgumentError("--resamples must be >= 1"));
  if (*seed < 0) return Fail(absl::InvalidArgumentError("--seed must be >= 0"));
  absl::StatusOr<double> temperature = args.Double("filler-temperature"),
                         penalty = args.Double("filler-frequency-penalty");
  if (!temperature.ok()) return Fail(temperature.status());
  if (!penalty.ok()) return Fail(penalty.status());
  o.filler_temperature = static_cast<float>(*temperature);
  o.filler_frequency_penalty = static_cast<float>(*penalty);
  o.cases = static_cast<int32_t>(*cases);
  o.seed = static_cast<uint64_t>(*seed);
  o.interval = static_cast<int32_t>(*interval);
  if (o.policies.empty()) return Fail(absl::InvalidArgumentError("--kv-policy: no compressing policy given"));
  // Bad options fail before the model loads.
  if (absl::Status s = eval::ValidateNeedleOptions(o); !s.ok()) return Fail(s);
  const std::string dir = args.Str("out-dir");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message())));

  const std::string model = args.Str("model");
  absl::StatusOr<std::unique_ptr<Runtime>> rt = LoadRuntime(args, static_cast<int>(*threads), "needle cases");
  if (!rt.ok()) return Fail(rt.status());

  std::string command = "beacon-eval needle";
  for (const char* flag : {"model", "distances", "kv-budget", "kv-policy", "cases", "seed", "kv-interval", "threads",
                           "filler-temperature", "filler-frequency-penalty"}) {
    absl::StrAppend(&command, " --", flag, " ", args.Str(flag));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<eval::NeedleCaseResult> results;
  // Every file again after every case: a run stopped early is still a
  // consistent (smaller) result, labelled partial.
  auto write = [&](bool complete) -> absl::Status {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const eval::NeedleSummary summary =
        eval::SummarizeNeedle(results, o.distances, static_cast<int>(*resamples), o.seed);
    const nlohmann::json settings = {{"model", model},
                                     {"command", command},
                                     {"complete", complete},
                                     {"seconds", seconds},
                                     {"threads", (*rt)->pool()->n_threads()},
                                     {"seed", o.seed},
                                     {"cases", o.cases},
                                     {"distances", o.distances},
                                     {"budgets", o.budgets},
                                     {"policies", o.policies},
                                     {"interval", o.interval},
                                     {"filler_temperature", o.filler_temperature},
                                     {"filler_top_p", o.filler_top_p},
                                     {"filler_frequency_penalty", o.filler_frequency_penalty},
                                     {"answer_slack", o.answer_slack},
                                     {"bootstrap_resamples", *resamples},
                                     {"case_results", eval::NeedleCasesJson(results)}};
    const std::string heading = absl::StrFormat(
        "# beacon-eval needle%s\n\nmodel %s, seed %d, %d cases tried per D, interval %d, filler temperature %.2f "
        "top-p %.2f frequency penalty %.2f; %.0f s on %d threads\n\n`%s`\n",
        complete ? "" : " (PARTIAL: run still going or stopped early)", model, o.seed, o.cases, o.interval,
        o.filler_temperature, o.filler_top_p, o.filler_frequency_penalty, seconds, (*rt)->pool()->n_threads(), command);
    if (absl::Status s = eval::WriteResults(eval::NeedleCellTable(summary), eval::NeedleMarkdown(summary, heading),
                                            settings, dir, "needle_summary");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = WriteText(dir, "needle_raw.csv", eval::NeedleRawTable(results).ToCsv()); !s.ok()) return s;
    return WriteText(dir, "needle_calibration.csv", eval::NeedleCalibrationTable(summary).ToCsv());
  };
  absl::Status written;
  absl::Status run = eval::RunNeedleEval(rt->get(), o, stderr, [&](const eval::NeedleCaseResult& r) {
    results.push_back(r);
    if (written.ok()) written = write(false);
  });
  if (!run.ok()) return Fail(run);
  if (!written.ok()) return Fail(written);
  if (absl::Status s = write(true); !s.ok()) return Fail(s);
  std::fprintf(stderr, "beacon-eval: wrote %s/needle_{raw,calibration}.csv, needle_summary.{csv,md,json}\n",
               dir.c_str());
  return 0;
}

int Revisit(const cli::Args& args) {
  eval::RevisitOptions o;
  absl::StatusOr<std::vector<int32_t>> budgets = args.PositiveIntList("kv-budget");
  if (!budgets.ok()) return Fail(budgets.status());
  o.budgets = *budgets;
  // The full cache always runs (the reference): "full" in the list is accepted.
  for (const std::string& p : ParseList(args, "kv-policy")) {
    if (p != "full") o.policies.push_back(p);
  }
  if (o.policies.empty()) return Fail(absl::InvalidArgumentError("--kv-policy: no compressing policy given"));
  std::vector<std::pair<const char*, int64_t>> ints;
  for (const char* flag :
       {"cases", "seed", "kv-interval", "threads", "facts", "revisited", "revisits-per-fact", "steps"}) {
    absl::StatusOr<int64_t> v = args.Int(flag);
    if (!v.ok()) return Fail(v.status());
    if (*v < 0 || *v > (int64_t{1} << 30)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", *v, " is out of range")));
    }
    ints.emplace_back(flag, *v);
  }
  auto get = [&](std::string_view flag) {
    for (const auto& [f, v] : ints) {
      if (f == flag) return static_cast<int32_t>(v);
    }
    return int32_t{0};
  };
  o.cases = get("cases");
  o.seed = static_cast<uint64_t>(get("seed"));
  o.interval = get("kv-interval");
  o.shape.facts = get("facts");
  o.shape.revisited = get("revisited");
  o.shape.revisits_per_fact = get("revisits-per-fact");
  o.shape.steps = get("steps");
  if (o.interval < 1) return Fail(absl::InvalidArgumentError("--kv-interval must be >= 1"));
  // Bad options fail before the model loads.
  if (absl::Status s = eval::ValidateRevisitOptions(o); !s.ok()) return Fail(s);
  const std::string dir = args.Str("out-dir");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message())));
  absl::StatusOr<std::unique_ptr<Runtime>> rt = LoadRuntime(args, get("threads"), "revisit cases");
  if (!rt.ok()) return Fail(rt.status());

  std::string command = "beacon-eval revisit";
  for (const char* flag : {"model", "kv-policy", "kv-budget", "kv-interval", "cases", "seed", "facts", "revisited",
                           "revisits-per-fact", "steps", "threads"}) {
    absl::StrAppend(&command, " --", flag, " ", args.Str(flag));
  }
  if (absl::Status s = eval::RunRevisitToFiles(rt->get(), o, args.Str("model"), command, dir, stderr); !s.ok()) {
    return Fail(s);
  }
  std::fprintf(stderr, "beacon-eval: wrote %s/revisit.{md,json}\n", dir.c_str());
  return 0;
}

int RevisitSteps(const cli::Args& args) {
  eval::RevisitStepsOptions o;
  o.from = args.Str("from");
  o.out_dir = args.Str("out-dir");
  o.policies = ParseList(args, "kv-policy");
  absl::StatusOr<std::vector<int32_t>> budgets = args.PositiveIntList("kv-budget");
  if (!budgets.ok()) return Fail(budgets.status());
  o.budgets = *budgets;
  absl::StatusOr<double> min_distinct = args.Double("min-distinct");
  absl::StatusOr<int64_t> threads = args.Int("threads");
  if (!min_distinct.ok()) return Fail(min_distinct.status());
  if (!threads.ok()) return Fail(threads.status());
  o.min_distinct = *min_distinct;
  o.thresholds.clear();
  for (const std::string& v : ParseList(args, "threshold")) {
    double x;
    if (!absl::SimpleAtod(v, &x) || !(x > 0.0 && x <= 1.0)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--threshold: '", v, "' is not a number in (0, 1]")));
    }
    o.thresholds.push_back(x);
  }
  if (o.thresholds.empty()) return Fail(absl::InvalidArgumentError("--threshold: empty"));
  // The grid's checks before the model loads (the checkpoints' interval is
  // checked again against it later).
  if (absl::StatusOr<std::vector<eval::PolicySpec>> g = eval::MakePolicyGrid(o.policies, o.budgets, 128); !g.ok()) {
    return Fail(g.status());
  }
  absl::StatusOr<std::unique_ptr<Runtime>> rt = LoadRuntime(args, static_cast<int>(*threads), "revisit-steps");
  if (!rt.ok()) return Fail(rt.status());
  if (absl::Status s = eval::RunRevisitSteps(rt->get(), o, stderr); !s.ok()) return Fail(s);
  std::fprintf(stderr, "beacon-eval: wrote %s/revisit_steps.{md,json}\n", o.out_dir.c_str());
  return 0;
}

const std::vector<cli::Command> kCommands = {
    {"model", "fidelity of the KV policies against the full cache on a model's generations"},
    {"synthetic", "recall of the KV policies on synthetic revisiting attention traces (no model)"},
    {"needle", "whether a fact stated early survives eviction, with bootstrap intervals"},
    {"revisit", "whether facts the text keeps revisiting survive eviction better than the others"},
    {"revisit-steps", "the fidelity replays re-scored on revisit steps only, looping traces dropped"}};

int Main(int argc, char** argv) {
  const std::string command = argc >= 2 ? argv[1] : "";
  if (cli::IsHelpArg(command)) {
    std::printf("%s", cli::CommandsHelp("beacon-eval", kCommands).c_str());
    return 0;
  }
  const bool model = command == "model", needle = command == "needle", revisit = command == "revisit";
  const bool steps = command == "revisit-steps";
  if (!model && !needle && !revisit && !steps && command != "synthetic") {
    std::fprintf(stderr, "%s", cli::CommandsHelp("beacon-eval", kCommands).c_str());
    return 2;
  }
  cli::Args args;
  args.Declare("kv-policy", false, CompressingPolicyNames(), "KV policies to rate, comma-separated");
  args.Declare("kv-budget", false,
               model     ? "128,256,512,1024"
               : needle  ? "64,128,256,512,1024"
               : revisit ? "64,128"
               : steps   ? "128,256"
                         : "64,128,256,512",
               "KV budgets, comma-separated: each policy runs at each");
  args.Declare("kv-interval", false, revisit ? "16" : "128", "decode steps between evictions");
  args.Refuse("budgets", "--budgets was renamed --kv-budget (a comma list, as in beacon-plan)");
  args.Refuse("policies", "--policies was renamed --kv-policy (a comma list, as in beacon-plan)");
  args.Refuse("interval", "--interval was renamed --kv-interval");
  args.Declare("out-dir", false, "build/eval", "directory for the results");
  if (!needle && !revisit && !steps) {  // these run beacon at its default and draw no plot
    args.Declare("plot-script", false, "tools/plot_fidelity.py", "the plotting script");
    args.Declare("plot", true, "true", "draw the PNG (--no-plot: skip it)");
    args.Declare("kv-beacon-prompt-queries", false, "",
                 "true, false or true,false: beacon's prompt queries in its FPS buffer (both: two configurations); "
                 "absent: the default");
  }
  // The model and threads of every command that runs a model.
  if (steps || revisit || needle || model) {
    args.Declare(
        "model", false, revisit ? "models/qwen2.5-coder-1.5b.gguf" : "models/default.gguf",
        steps ? "the model that made the checkpoints' traces" : "GGUF file or HF directory (needs a tokenizer)");
    args.Declare("threads", false, "0", "CPU threads (0 = all)");
  }
  if (steps) {
    args.Declare("from", false, "eval/results/fidelity-T2048", "a beacon-eval model output directory");
    args.Declare("threshold", false, "0.1",
                 "reference attention share on old generated tokens for a revisit step (a comma list: one table "
                 "each)");
    args.Declare("min-distinct", false, "0.1", "drop traces whose distinct-4-gram ratio is below this");
  } else if (revisit) {
    args.Declare("cases", false, "10", "cases (ids 0..N-1)");
    args.Declare("seed", false, "1", "seed of the cases (facts, values, which are revisited, counting steps)");
    args.Declare("facts", false, "6", "vault codes stated at the start of the reasoning");
    args.Declare("revisited", false, "3", "of them, named again during the stretch");
    args.Declare("revisits-per-fact", false, "3", "mentions of each revisited fact");
    args.Declare("steps", false, "14", "counting steps in the stretch");
  } else if (needle) {
    args.Declare("distances", false, "256,1024,2048", "filler tokens D between the fact and the cue, comma-separated");
    args.Declare("cases", false, "20", "cases tried per D (ids 0..N-1)");
    args.Declare("seed", false, "1", "seed of the cases (facts and filler samplers) and of the bootstrap");
    args.Declare("resamples", false, "2000", "bootstrap resamples per interval");
    args.Declare("filler-temperature", false, "0.8", "the filler sampler's temperature");
    args.Declare("filler-frequency-penalty", false, "0", "the filler sampler's frequency penalty");
  } else if (model) {
    args.Declare("prompts", false, "eval/prompts/long_prompts.jsonl", "JSON-lines prompts {\"id\", \"prompt\"}");
    args.Declare("tokens", false, "2048", "generated tokens T per prompt (the trace length)");
    args.Declare("max-prompts", false, "0", "use only the first N prompts (0 = all)");
    args.Declare("kv-beacon-state", false, "",
                 "f32, bf16 or f32,bf16: beacon's ring and FPS buffers in f32 or bf16-rounded (both: two "
                 "configurations, the bf16 one's kept slots compared with the f32 one's); absent: the default");
    args.Declare("subject", false, "beacon",
                 "the configuration the paired comparison rates against every other of its budget");
    args.Declare("resume", true, "false",
                 "reuse the prompts already saved in OUT/prompts/ under the same settings (never after an engine "
                 "change)");
  } else {
    args.Declare("seed", false, "1", "seed of the first trace");
    args.Declare("traces", false, "4", "traces (seeds seed, seed+1, ...) to average over");
    args.Declare("middle", false, "2000", "working tokens after the plan span");
  }
  if (absl::Status s = args.Parse(argc, argv, 2); !s.ok()) return Fail(s);
  if (args.help()) {
    std::printf("%s", args.Help(absl::StrCat("usage: beacon-eval ", command, " [options]")).c_str());
    return 0;
  }
  if (!args.positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'"));
  }
  if (needle) return Needle(args);
  if (revisit) return Revisit(args);
  if (steps) return RevisitSteps(args);
  return model ? Model(args) : Synthetic(args);
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-eval", &beacon::Main, argc, argv); }
