// beacon-bench: measured performance of the engine.
//
//   beacon-bench decode --model PATH [--batches 1,4,16,64] [--prompt-len 32]
//                       [--steps 32] [--threads N] [--json FILE]
//                       [--contexts 64,2048,4096] [--kv-cache-dtype bf16|q8_0|f32]
//   beacon-bench policy ...   KV policies' cost on the CPU backend
//   beacon-bench growth ...   tokens/s as one sequence's context grows
//   beacon-bench prefill --model PATH [--prompt-len 1024,2048,4096]
//                       [--chunk 256] [--repeats 1] [--threads N] [--json FILE]
//                             prompt processing tokens/s (bench/prefill_bench.h)
//   beacon-bench grammar --model PATH [--batch 16] [--steps 64] [--rounds 3]
//                             decode tokens/s with and without a JSON schema
//                             on every sequence (bench/grammar_bench.h)
//   beacon-bench cuda ...     the CUDA backend (bench/cuda_bench.h;
//                             builds with CUDA only)
//   beacon-bench COMMAND --help   a command's options and defaults
//
// Measures, in one run, this machine's memory bandwidth (a streaming copy of
// a buffer far larger than the caches) and decode throughput at each batch
// size (each step a serving step: the StepExecutor's forward pass, greedy
// draw and detokenising, since 2026-12-05; a bare forward pass before);
// prints the batch-1 fraction of the bandwidth roofline (weight bytes
// read per token / step time against that bandwidth), and for every batch the
// fraction of the compute roofline (the matrices' multiply-adds per second
// against this machine's int8 dot-product peak, bench/int8_peak.h), which is
// what bounds batched steps.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bandwidth.h"
#include "bench/grammar_bench.h"
#include "bench/growth_bench.h"
#include "bench/int8_peak.h"
#include "bench/policy_bench.h"
#include "bench/prefill_bench.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "engine/step_executor.h"
#include "kv/policy/policy_registry.h"
#include "nlohmann/json.hpp"
#include "plot/png_plot.h"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
#ifdef BEACON_HAVE_CUDA
int CudaBenchMain(const cli::Args& args);
#endif
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "beacon-bench: %s\n", std::string(s.message()).c_str());
  return 2;
}

// --kv-cache-dtype into the runtime options (every CPU mode measures any).
// The model every sub-command runs: --model, --kv-cache-dtype and `threads`
// (0: all); `ro` says what was asked (for the report).
absl::StatusOr<std::unique_ptr<Runtime>> OpenRuntime(const cli::Args& args, int64_t threads, RuntimeOptions* ro) {
  ro->model = args.Str("model");
  absl::StatusOr<DType> t = ParseKvCacheDType(args.Str("kv-cache-dtype"));
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("--kv-cache-dtype: ", t.status().message()));
  ro->kv_cache_dtype = *t;
  ro->threads = static_cast<int>(threads);
  return Runtime::Create(*ro);
}

// --kv-policy's policies, each at `budget` and `interval`.
absl::StatusOr<std::vector<KvPolicyOptions>> PolicyList(const cli::Args& args, int64_t budget, int64_t interval) {
  std::vector<KvPolicyOptions> policies;
  for (absl::string_view p : absl::StrSplit(args.Str("kv-policy"), ',', absl::SkipEmpty())) {
    absl::StatusOr<KvPolicyOptions> o = KvPolicyOptions::DefaultsForName(std::string_view(p.data(), p.size()));
    if (!o.ok()) return o.status();
    o->budget = static_cast<int32_t>(budget);
    o->interval = static_cast<int32_t>(interval);
    if (absl::Status st = o->Validate(); !st.ok()) return st;
    policies.push_back(*o);
  }
  return policies;
}

struct DecodeResult {
  int batch;
  double step_ms;
  double tokens_per_second;
};

// `batch` sequences of distinct `prompt_len`-token prompts, prefilled one at
// a time (not timed), then `steps` decode steps of the whole batch, timed.
// Every step goes through the StepExecutor serving runs (the forward pass,
// the greedy draw, detokenising, stop checks), so the figure is a serving
// step's, not a bare forward pass's; the cache is full (no compression).
absl::StatusOr<DecodeResult> BenchDecode(Runtime* rt, int batch, int prompt_len, int steps) {
  const ModelConfig& cfg = rt->config();
  absl::StatusOr<std::unique_ptr<KvCache>> made_cache = rt->MakeKvCache(int64_t{batch} * (prompt_len + steps + 32));
  if (!made_cache.ok()) return made_cache.status();
  std::unique_ptr<KvCache> cache = *std::move(made_cache);
  GenerationOptions options;
  options.max_tokens = steps + 2;  // the warm-up and the timed steps, after the prefill's token
  options.ignore_eos = true;
  options.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  std::vector<std::unique_ptr<Generation>> gens;
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt(prompt_len);
    for (int i = 0; i < prompt_len; ++i) prompt[i] = (b * 131 + i * 31 + 7) % cfg.vocab_size;
    absl::StatusOr<std::unique_ptr<Generation>> g =
        Generation::Create(rt->tokenizer(), cache.get(), cfg, std::move(prompt), options);
    if (!g.ok()) return g.status();
    (*g)->set_thread_pool(rt->backend()->host_pool());
    gens.push_back(*std::move(g));
  }
  StepExecutor executor(rt->backend());
  std::vector<ExecItem> items;
  std::vector<ExecResult> results;
  for (const std::unique_ptr<Generation>& g : gens) {  // the prefill, one sequence at a time
    items = {ExecItem{g.get(), prompt_len}};
    if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;
  }
  items.clear();
  for (const std::unique_ptr<Generation>& g : gens) items.push_back(ExecItem{g.get(), 1});
  if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;  // warm-up
  const auto t0 = Clock::now();
  for (int i = 1; i <= steps; ++i) {
    if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;
  }
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  return DecodeResult{batch, sec / steps * 1e3, batch * steps / sec};
}

nlohmann::json StepSummaryJson(const StepTimeSummary& s) {
  return {{"steps", s.steps},
          {"mean_ms", s.mean_s * 1e3},
          {"p50_ms", s.p50_s * 1e3},
          {"p99_ms", s.p99_s * 1e3},
          {"max_ms", s.max_s * 1e3}};
}

// The per-step figures of one policy run: every step and the steady state.
nlohmann::json PolicyStepJson(const PolicyStepStats& p) {
  return {{"first_eviction_step", p.first_eviction_step()},
          {"steady_evictions", p.steady_evictions()},
          {"steady_evictions_per_step", p.steady_evictions_per_step()},
          {"all_steps", StepSummaryJson(p.All())},
          {"steady", StepSummaryJson(p.Steady())},
          {"steady_without_evictions", StepSummaryJson(p.SteadyWithoutEvictions())}};
}

// beacon-bench policy: each policy's cost per decode step and per eviction
// as a share of the decode step time, on one sequence; then the policy's
// work per step after the first eviction (mean, p50, p99, max).
int PolicyMain(const cli::Args& args) {
  absl::StatusOr<int64_t> budget = args.Int("kv-budget"), interval = args.Int("kv-interval"),
                          steps = args.Int("decode-steps"), prompt_len = args.Int("prompt-len"),
                          threads = args.Int("threads"), batch = args.Int("batch"), stagger = args.Int("stagger");
  for (const absl::Status& s : {budget.status(), interval.status(), steps.status(), prompt_len.status(),
                                threads.status(), batch.status(), stagger.status()}) {
    if (!s.ok()) return Fail(s);
  }
  if (*batch < 1 || *batch > 256) return Fail(absl::InvalidArgumentError("--batch must be 1..256"));
  PolicyBenchShape shape{.prompt_len = static_cast<int32_t>(*prompt_len),
                         .steps = static_cast<int32_t>(*steps),
                         .batch = static_cast<int32_t>(*batch),
                         .stagger = static_cast<int32_t>(*stagger < 0 ? *interval / *batch : *stagger)};
  const std::string phase = args.Str("eviction-phase");
  if (phase != "spread" && phase != "aligned") {
    return Fail(absl::InvalidArgumentError("--eviction-phase must be spread or aligned"));
  }
  shape.spread_phase = phase == "spread";
  absl::StatusOr<std::vector<KvPolicyOptions>> policy_list = PolicyList(args, *budget, *interval);
  if (!policy_list.ok()) return Fail(policy_list.status());
  const std::vector<KvPolicyOptions>& policies = *policy_list;
  RuntimeOptions ro;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = OpenRuntime(args, *threads, &ro);
  if (!rt.ok()) return Fail(rt.status());
  std::printf(
      "model %s, prompt %lld, %lld decode steps, budget %lld, interval %lld, threads %d, batch %d "
      "(head starts %d steps apart, eviction phases %s)\n",
      ro.model.c_str(), static_cast<long long>(*prompt_len), static_cast<long long>(*steps),
      static_cast<long long>(*budget), static_cast<long long>(*interval), (*rt)->pool()->n_threads(), shape.batch,
      shape.stagger, phase.c_str());
  std::printf("%-14s %10s %10s %12s %12s %12s %10s\n", "policy", "step ms", "evictions", "observe/step", "evict/step",
              "total", "peak KV");
  const std::string pool_mode = args.Str("policy-pool");
  if (pool_mode != "on" && pool_mode != "off" && pool_mode != "both") {
    return Fail(absl::InvalidArgumentError("--policy-pool must be on, off or both"));
  }
  std::vector<bool> pool_runs;
  if (pool_mode != "off") pool_runs.push_back(true);
  if (pool_mode != "on") pool_runs.push_back(false);
  nlohmann::json out;
  std::vector<std::pair<std::string, PolicyStepStats>> per_step, whole;  // the steady-state tables, printed after
  for (const KvPolicyOptions& o : policies) {
    for (bool use_pool : pool_runs) {
      absl::StatusOr<PolicyBenchResult> r = BenchPolicy(rt->get(), o, shape, use_pool);
      if (!r.ok()) return Fail(r.status());
      const double step_ms = (r->decode_s - r->observe_s) / r->steps * 1e3;
      const std::string label = std::string(o.policy_name()) + (use_pool ? "" : "/serial");
      std::printf("%-14s %10.2f %10lld %11.2f%% %11.2f%% %11.2f%% %10d\n", label.c_str(), step_ms,
                  static_cast<long long>(r->evictions), 100 * r->observe_share(), 100 * r->evict_share(),
                  100 * (r->observe_share() + r->evict_share()), r->peak_slots);
      out["policies"].push_back({{"policy", o.policy},
                                 {"policy_pool", use_pool},
                                 {"step_ms", step_ms},
                                 {"evictions", r->evictions},
                                 {"observe_share", r->observe_share()},
                                 {"evict_share", r->evict_share()},
                                 {"peak_slots", r->peak_slots},
                                 {"per_step", PolicyStepJson(r->per_step)},
                                 {"batch", shape.batch},
                                 {"stagger", shape.stagger},
                                 {"eviction_phase", phase},
                                 {"whole_step", PolicyStepJson(r->whole_step)}});
      std::fflush(stdout);
      per_step.emplace_back(label, r->per_step);
      whole.emplace_back(label, r->whole_step);
    }
  }
  // The policy's own work per decode step (observation + eviction), in the
  // steady state after the first eviction (bench/policy_step_stats.h).
  std::printf("\npolicy work per step after the first eviction (observe + evict, ms)\n");
  // The last two columns leave out the steps that evicted: the
  // observation's own bursts (beacon's FPS shrinks).
  std::printf("%-14s %8s %12s %10s %10s %10s %10s %12s %12s\n", "policy", "steps", "evict/step", "mean", "p50", "p99",
              "max", "p99 no-evict", "max no-evict");
  for (const auto& [label, stats] : per_step) {
    const StepTimeSummary s = stats.Steady(), q = stats.SteadyWithoutEvictions();
    std::printf("%-14s %8lld %12.5f %10.3f %10.3f %10.3f %10.3f %12.3f %12.3f\n", label.c_str(),
                static_cast<long long>(s.steps), stats.steady_evictions_per_step(), s.mean_s * 1e3, s.p50_s * 1e3,
                s.p99_s * 1e3, s.max_s * 1e3, q.p99_s * 1e3, q.max_s * 1e3);
  }
  // Whole steps (forward + picks + evictions) after the first eviction: the
  // inter-token latency's tail against its median (issue 34: p99 <= 1.3x).
  std::printf("\nwhole steps after the first eviction (ms)\n");
  // The last column leaves the eviction steps out: the forward pass's (and
  // the host's) own tail, for telling it apart from the evictions'.
  std::printf("%-14s %8s %12s %10s %10s %10s %10s %10s %12s\n", "policy", "steps", "evict steps", "mean", "p50", "p99",
              "max", "p99/p50", "p99 no-evict");
  for (const auto& [label, stats] : whole) {
    const StepTimeSummary s = stats.Steady(), q = stats.SteadyWithoutEvictions();
    std::printf("%-14s %8lld %12lld %10.2f %10.2f %10.2f %10.2f %10.3f %12.2f\n", label.c_str(),
                static_cast<long long>(s.steps), static_cast<long long>(s.steps - q.steps), s.mean_s * 1e3,
                s.p50_s * 1e3, s.p99_s * 1e3, s.max_s * 1e3, s.p50_s > 0 ? s.p99_s / s.p50_s : 0.0, q.p99_s * 1e3);
  }
  if (!args.Str("json").empty()) std::ofstream(args.Str("json")) << out.dump(2) << "\n";
  return 0;
}

// beacon-bench prefill: tokens/s of prefilling one prompt of each length,
// in chunks as the scheduler runs a long prompt.
int PrefillMain(const cli::Args& args) {
  absl::StatusOr<int64_t> chunk = args.Int("chunk"), repeats = args.Int("repeats"), threads = args.Int("threads");
  for (const absl::Status& s : {chunk.status(), repeats.status(), threads.status()}) {
    if (!s.ok()) return Fail(s);
  }
  absl::StatusOr<std::vector<int32_t>> lens = args.PositiveIntList("prompt-len");
  if (!lens.ok()) return Fail(lens.status());
  RuntimeOptions ro;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = OpenRuntime(args, *threads, &ro);
  if (!rt.ok()) return Fail(rt.status());
  std::printf("model %s, threads %d, chunk %lld, best of %lld\n", ro.model.c_str(), (*rt)->pool()->n_threads(),
              static_cast<long long>(*chunk), static_cast<long long>(*repeats));
  std::printf("%10s %8s %10s %12s\n", "prompt", "steps", "seconds", "tokens/s");
  nlohmann::json out = {{"model", ro.model}, {"threads", (*rt)->pool()->n_threads()}, {"chunk", *chunk}};
  for (int n : *lens) {
    absl::StatusOr<PrefillBenchResult> r =
        BenchPrefill(rt->get(), n, static_cast<int32_t>(*chunk), static_cast<int>(*repeats));
    if (!r.ok()) return Fail(r.status());
    std::printf("%10d %8d %10.3f %12.1f\n", n, r->steps, r->seconds, r->tokens_per_second());
    std::fflush(stdout);
    out["prefill"].push_back({{"prompt_len", n},
                              {"steps", r->steps},
                              {"seconds", r->seconds},
                              {"tokens_per_second", r->tokens_per_second()}});
  }
  if (!args.Str("json").empty()) std::ofstream(args.Str("json")) << out.dump(2) << "\n";
  return 0;
}

// beacon-bench growth: tokens/s of one sequence as its context grows, per
// policy; a table, and optionally a CSV and a PNG plot.
int GrowthMain(const cli::Args& args) {
  absl::StatusOr<int64_t> budget = args.Int("kv-budget"), interval = args.Int("kv-interval"),
                          total = args.Int("growth-tokens"), window = args.Int("growth-window"),
                          prompt_len = args.Int("prompt-len"), threads = args.Int("threads");
  for (const absl::Status& s :
       {budget.status(), interval.status(), total.status(), window.status(), prompt_len.status(), threads.status()}) {
    if (!s.ok()) return Fail(s);
  }
  absl::StatusOr<std::vector<KvPolicyOptions>> policy_list = PolicyList(args, *budget, *interval);
  if (!policy_list.ok()) return Fail(policy_list.status());
  const std::vector<KvPolicyOptions>& policies = *policy_list;
  RuntimeOptions ro;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = OpenRuntime(args, *threads, &ro);
  if (!rt.ok()) return Fail(rt.status());
  std::printf("model %s, prompt %lld, to %lld tokens, windows of %lld, budget %lld, interval %lld, threads %d\n",
              ro.model.c_str(), static_cast<long long>(*prompt_len), static_cast<long long>(*total),
              static_cast<long long>(*window), static_cast<long long>(*budget), static_cast<long long>(*interval),
              (*rt)->pool()->n_threads());
  plot::LinePlot plot;
  plot.title = absl::StrCat("Decode speed of one sequence as it grows (", ro.model, ")");
  plot.x_label = "tokens in the sequence";
  plot.y_label = "tokens/s";
  plot.y_from_zero = true;
  std::string csv = "policy,context,cached_slots,tokens_per_s\n";
  for (const KvPolicyOptions& o : policies) {
    absl::StatusOr<std::vector<GrowthSample>> r = BenchGrowth(
        rt->get(), o, static_cast<int32_t>(*prompt_len), static_cast<int32_t>(*total), static_cast<int32_t>(*window));
    if (!r.ok()) return Fail(r.status());
    const std::string name = o.compresses() ? absl::StrCat(std::string(o.policy_name()), "@", o.budget) : "full";
    std::vector<std::pair<double, double>> points;
    // Flatness once the cache is bounded: the windows that ended compressed
    // (all of them under full).
    double lo = 0, hi = 0;
    for (const GrowthSample& g : *r) {
      std::printf("%-12s context %6d  slots %6d  %8.1f tok/s\n", name.c_str(), g.context, g.cached_slots,
                  g.tokens_per_s);
      absl::StrAppend(&csv, name, ",", g.context, ",", g.cached_slots, ",", g.tokens_per_s, "\n");
      points.emplace_back(g.context, g.tokens_per_s);
      if (o.compresses() && g.cached_slots == g.context) continue;
      lo = lo == 0 ? g.tokens_per_s : std::min(lo, g.tokens_per_s);
      hi = std::max(hi, g.tokens_per_s);
    }
    std::printf("%-12s first %.1f, last %.1f tok/s (last/first %.3f); min/max %.3f%s\n", name.c_str(),
                r->front().tokens_per_s, r->back().tokens_per_s, r->back().tokens_per_s / r->front().tokens_per_s,
                hi > 0 ? lo / hi : 0.0, o.compresses() ? " after the first eviction" : "");
    plot.AddSeries(name, std::move(points));
  }
  if (!args.Str("csv").empty()) std::ofstream(args.Str("csv")) << csv;
  if (!args.Str("png").empty()) {
    if (absl::Status s = plot.WritePng(args.Str("png")); !s.ok()) return Fail(s);
  }
  return 0;
}

// beacon-bench grammar: structured output's cost per decode step.
int GrammarMain(const cli::Args& args) {
  absl::StatusOr<int64_t> batch = args.Int("batch"), steps = args.Int("steps"), rounds = args.Int("rounds"),
                          threads = args.Int("threads");
  for (const absl::Status& s : {batch.status(), steps.status(), rounds.status(), threads.status()}) {
    if (!s.ok()) return Fail(s);
  }
  RuntimeOptions ro;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = OpenRuntime(args, *threads, &ro);
  if (!rt.ok()) return Fail(rt.status());
  absl::StatusOr<GrammarBenchResult> r =
      BenchGrammar(rt->get(), static_cast<int32_t>(*batch), static_cast<int32_t>(*steps), static_cast<int32_t>(*rounds),
                   kGrammarBenchSchema);
  if (!r.ok()) return Fail(r.status());
  std::printf("model %s, batch %d, %d decode steps x %zu rounds, threads %d\n", ro.model.c_str(), r->batch, r->steps,
              r->free_tokens_per_s.size(), (*rt)->pool()->n_threads());
  for (size_t i = 0; i < r->free_tokens_per_s.size(); ++i) {
    std::printf("round %zu: free %.1f tok/s, schema %.1f tok/s\n", i + 1, r->free_tokens_per_s[i],
                r->grammar_tokens_per_s[i]);
  }
  std::printf("median: free %.1f, schema %.1f tok/s: schema/free %.3f (%.1f%% slower)\n",
              r->Median(r->free_tokens_per_s), r->Median(r->grammar_tokens_per_s), r->ratio(), (1 - r->ratio()) * 100);
  std::printf("compile: cold %.1f ms, cached %.3f ms\n", r->compile_cold_ms, r->compile_cached_ms);
  if (!args.Str("json").empty()) {
    nlohmann::json j = {{"model", ro.model},
                        {"batch", r->batch},
                        {"steps", r->steps},
                        {"threads", (*rt)->pool()->n_threads()},
                        {"schema", std::string(kGrammarBenchSchema)},
                        {"free_tokens_per_s", r->free_tokens_per_s},
                        {"schema_tokens_per_s", r->grammar_tokens_per_s},
                        {"ratio_of_medians", r->ratio()},
                        {"compile_cold_ms", r->compile_cold_ms},
                        {"compile_cached_ms", r->compile_cached_ms}};
    std::ofstream(args.Str("json")) << j.dump(2) << "\n";
  }
  return 0;
}

const std::vector<cli::Command> kCommands = {
    {"decode", "decode tokens/s at each batch size against the memory-bandwidth roofline"},
    {"policy", "each KV policy's cost per decode step and per eviction (CPU)"},
    {"prefill", "prompt processing tokens/s at each prompt length"},
    {"growth", "one sequence's tokens/s as its context grows, per KV policy"},
    {"grammar", "decode tokens/s with and without a JSON schema on every sequence (structured output)"},
    {"cuda", "the CUDA backend: decode roofline, BeaconKV overhead, throughput (CUDA builds only)"}};

// The options of `mode` (one of kCommands), with its defaults.
void DeclareBenchFlags(const std::string& mode, cli::Args* args) {
  const bool cpu = mode != "cuda";
  args->Declare("model", false, "models/default.gguf", "model spec");
  if (cpu) {
    args->Declare("threads", false, "0", "CPU threads (0 = all)");
    args->Declare("kv-cache-dtype", false, "auto", "KV cache element type: auto (= bf16), bf16, q8_0, f32");
  }
  if (mode != "growth") args->Declare("json", false, "", "also write the results to this JSON file");
  if (mode == "decode" || mode == "cuda") {
    args->Declare("batches", false, "1,4,16,64", "batch sizes, comma-separated");
    args->Declare("steps", false, "32", "timed decode steps per batch size");
  }
  if (mode == "decode") {
    args->Declare("prompt-len", false, "32", "prompt tokens per sequence before decoding");
    args->Declare("contexts", false, "",
                  "also time batch-1 steps after prompts of these lengths (comma-separated; best of 3 rounds)");
  } else if (mode == "grammar") {
    args->Declare("batch", false, "16", "sequences decoding together");
    args->Declare("steps", false, "64", "timed decode steps per round");
    args->Declare("rounds", false, "3", "rounds of each kind, alternating (medians reported)");
  } else if (mode == "prefill") {
    args->Declare("prompt-len", false, "4096", "prompt lengths, comma-separated");
    args->Declare("chunk", false, "256", "prompt tokens per step (the scheduler's default prefill_chunk)");
    args->Declare("repeats", false, "1", "runs per length; the fastest is reported");
  } else if (mode == "policy" || mode == "growth") {
    const bool policy = mode == "policy";
    args->Declare("prompt-len", false, "32", "prompt tokens before decoding");
    args->Declare("kv-policy", false, policy ? CompressingPolicyNames() : "full,beacon",
                  "KV policies to measure, comma-separated");
    args->Declare("kv-budget", false, "512", "KV budget");
    args->Declare("kv-interval", false, "128", "eviction interval");
    args->Refuse("policies", "--policies was renamed --kv-policy (a comma list)");
    args->Refuse("growth-policies", "--growth-policies was renamed --kv-policy (a comma list)");
    if (policy) {
      args->Declare("decode-steps", false, "1024", "decode steps per policy");
      args->Declare("batch", false, "1", "sequences decoding together, one forward pass per step");
      args->Declare("stagger", false, "-1",
                    "decode steps of head start between consecutive sequences (-1: interval / batch, so their "
                    "evictions fall on different steps; 0: all start together)");
      args->Declare("eviction-phase", false, "spread",
                    "spread: each sequence's first eviction moved by its prompt's phase, as beacon-serve does; "
                    "aligned: all on the published schedule (with --stagger 0, all evict on the same step)");
      args->Declare("policy-pool", false, "on",
                    "on (the compressor uses the CPU pool, as serving does), off, or both (a /serial row too)");
    } else {
      args->Declare("growth-tokens", false, "8192", "decode until the sequence holds this many tokens");
      args->Declare("growth-window", false, "512", "decode steps per tokens/s sample");
      args->Declare("csv", false, "", "also write the samples to this CSV file");
      args->Declare("png", false, "", "also plot tokens/s against context into this PNG");
    }
  } else if (mode == "cuda") {
    args->Declare("kv-budget", false, "512", "BeaconKV's budget (overhead and throughput)");
    args->Declare("context", false, "1024", "cached slots per sequence in the decode benchmark");
    args->Declare("pool-seqs", false, "16", "the throughput pool holds this many full sequences");
    args->Declare("prompt-len", false, "256", "prompt tokens per request (throughput)");
    args->Declare("output-len", false, "8192", "output tokens per request (throughput)");
    args->Declare("throughput-steps", false, "512", "timed decode steps per policy (throughput)");
    args->Declare("parts", false, "decode,overhead,throughput", "which benchmarks run, comma-separated");
    args->Declare("kv-beacon-group-queries", true, "",
                  "BeaconKV (overhead, throughput) with its state per KV head, of the group's mean query");
    args->Declare("profile", true, "",
                  "after each timing, one more decode step (and one eviction) in a profiled range for "
                  "`ncu --profile-from-start off` (bench/cuda_profile.h; tools/ncu_summary.py reads the CSV)");
    args->Declare("cuda-graphs", true, "true", "replay CUDA graphs for all-decode steps");
    args->Declare("cuda-max-splits", false, "16", "split-K partitions per token and KV head in decode attention");
    args->Declare("cuda-tensor-core-decode", true, "", "decode attention on tensor cores (head_dim 64 and 128)");
    args->Declare("cuda-flashinfer-decode", true, "",
                  "decode attention by FlashInfer (with --cuda-tensor-core-decode its tensor-core kernel)");
    args->Declare("cuda-small-batch-gemv", true, "", "projections of at most 8 tokens on a matrix-vector kernel");
    args->Declare("cuda-tensor-core-score", true, "true",
                  "BeaconKV's eviction scoring on tensor cores (head_dim 64, 128)");
    args->Declare("cuda-programmatic-launch", true, "",
                  "the decode step's own kernels with programmatic dependent launch");
    args->Refuse("prompt-tokens", "--prompt-tokens was renamed --prompt-len (a count)");
    args->Refuse("output-tokens", "--output-tokens was renamed --output-len (a count)");
  }
}

int Main(int argc, char** argv) {
  // The command is the first argument that names one (`beacon-bench decode
  // --model M`; `--model M decode` is accepted too).
  std::string mode;
  int mode_at = 0;
  for (int i = 1; i < argc && mode.empty(); ++i) {
    for (const cli::Command& c : kCommands) {
      if (c.name == argv[i]) mode = argv[mode_at = i];
    }
  }
  if (mode.empty()) {
    const bool help = argc >= 2 && cli::IsHelpArg(argv[1]);
    std::fprintf(help ? stdout : stderr, "%s", cli::CommandsHelp("beacon-bench", kCommands).c_str());
    return help ? 0 : 2;
  }
  cli::Args args;
  DeclareBenchFlags(mode, &args);
  std::vector<char*> rest(argv, argv + argc);
  rest.erase(rest.begin() + mode_at);
  if (absl::Status s = args.Parse(static_cast<int>(rest.size()), rest.data()); !s.ok()) return Fail(s);
  if (args.help()) {
    std::printf("%s", args.Help(absl::StrCat("usage: beacon-bench ", mode, " [options]")).c_str());
    return 0;
  }
  if (!args.positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'"));
  }
  if (mode == "policy") return PolicyMain(args);
  if (mode == "growth") return GrowthMain(args);
  if (mode == "grammar") return GrammarMain(args);
  if (mode == "prefill") return PrefillMain(args);
  if (mode == "cuda") {
#ifdef BEACON_HAVE_CUDA
    return CudaBenchMain(args);
#else
    return Fail(absl::FailedPreconditionError("this build has no CUDA (configure with nvcc on the PATH)"));
#endif
  }
  absl::StatusOr<int64_t> prompt_len = args.Int("prompt-len"), steps = args.Int("steps"), threads = args.Int("threads");
  for (const absl::Status& s : {prompt_len.status(), steps.status(), threads.status()}) {
    if (!s.ok()) return Fail(s);
  }
  absl::StatusOr<std::vector<int32_t>> batches = args.PositiveIntList("batches");
  if (!batches.ok()) return Fail(batches.status());
  RuntimeOptions ro;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = OpenRuntime(args, *threads, &ro);
  if (!rt.ok()) return Fail(rt.status());

  const double weight_bytes = static_cast<double>((*rt)->weights().StreamedWeightBytes());
  // DRAM bandwidth: 1 GiB each way, far past any last-level cache. Also the
  // bandwidth of a copy the size of the weights, which may be cache-resident
  // (a small model can fit a server CPU's L3): the tighter roofline then.
  const double bw = MeasureCopyBandwidth((*rt)->pool(), size_t{1} << 30);
  const double bw_model = MeasureCopyBandwidth((*rt)->pool(), static_cast<size_t>(weight_bytes) / 64 * 64);
  // The read-only limit on huge pages, as the packed weights are stored: the
  // physical bound a decode step (which only reads weights) is held to.
  const double bw_read = MeasureReadBandwidth((*rt)->pool(), size_t{1} << 30);
  // The compute limit of batched steps: a token costs one multiply-add per
  // matrix element, at best at the int8 dot product's peak (the quantised
  // kernels' instruction). Meaningful for quantised models; float matrices
  // run on FMAs instead.
  const double macs_per_token = static_cast<double>((*rt)->weights().StreamedWeightElements());
  const Int8DotPeak int8 = MeasureInt8DotPeak((*rt)->pool());
  std::printf("model %s: %d layers, hidden %d, weights read per step %.1f MB (%s matrices)\n", ro.model.c_str(),
              (*rt)->config().n_layers, (*rt)->config().hidden, weight_bytes / 1e6,
              std::string(DTypeName((*rt)->weights().layers[0].wq.dtype)).c_str());
  std::printf(
      "threads %d, streaming copy bandwidth %.2f GB/s (1 GiB, read+write), %.2f GB/s (weight-sized); "
      "read %.2f GB/s (1 GiB, huge pages)\n",
      (*rt)->pool()->n_threads(), bw / 1e9, bw_model / 1e9, bw_read / 1e9);
  std::printf("int8 dot peak %.1f G MAC/s (%s, %d threads); %.3f G multiply-adds per token in the matrices\n",
              int8.macs_per_second / 1e9, int8.instruction.c_str(), (*rt)->pool()->n_threads(), macs_per_token / 1e9);
  const std::string kv_type(KvCacheDTypeName(ro.kv_cache_dtype));
  const double kv_bytes_per_token = 2.0 * (*rt)->config().n_layers * (*rt)->config().n_kv_heads *
                                    static_cast<double>(DTypeRowBytes(ro.kv_cache_dtype, (*rt)->config().head_dim));
  std::printf("KV cache %s, %.0f bytes per token; context %lld tokens at the first timed step\n", kv_type.c_str(),
              kv_bytes_per_token, static_cast<long long>(*prompt_len + 1));
  std::printf("%6s %10s %12s %10s %14s %11s %10s\n", "batch", "step ms", "tokens/s", "roofline", "roofline(wsz)",
              "read roof", "int8 roof");
  nlohmann::json out = {{"model", ro.model},
                        {"kv_cache_dtype", kv_type},
                        {"kv_bytes_per_token", kv_bytes_per_token},
                        {"prompt_len", *prompt_len},
                        {"threads", (*rt)->pool()->n_threads()},
                        {"copy_bandwidth_gbps", bw / 1e9},
                        {"copy_bandwidth_weight_sized_gbps", bw_model / 1e9},
                        {"read_bandwidth_huge_pages_gbps", bw_read / 1e9},
                        {"int8_dot_peak_gmacs", int8.macs_per_second / 1e9},
                        {"int8_dot_instruction", int8.instruction},
                        {"macs_per_token", macs_per_token},
                        {"weight_bytes", weight_bytes}};
  for (int b : *batches) {
    absl::StatusOr<DecodeResult> r = BenchDecode(rt->get(), b, static_cast<int>(*prompt_len), static_cast<int>(*steps));
    if (!r.ok()) return Fail(r.status());
    // The bandwidth roofline of one step: every weight byte read once.
    const double roof_ms = weight_bytes / bw * 1e3;
    const double frac = roof_ms / r->step_ms;
    const double frac_model = weight_bytes / bw_model * 1e3 / r->step_ms;
    const double frac_read = weight_bytes / bw_read * 1e3 / r->step_ms;
    // The compute roofline: the step's multiply-adds at the int8 peak.
    const double frac_int8 =
        int8.macs_per_second > 0 ? r->tokens_per_second * macs_per_token / int8.macs_per_second : 0.0;
    std::printf("%6d %10.2f %12.1f %9.0f%% %13.0f%% %10.0f%% %9.0f%%\n", b, r->step_ms, r->tokens_per_second,
                frac * 100, frac_model * 100, frac_read * 100, frac_int8 * 100);
    out["decode"].push_back({{"batch", b},
                             {"step_ms", r->step_ms},
                             {"tokens_per_second", r->tokens_per_second},
                             {"roofline_fraction", frac},
                             {"roofline_fraction_weight_sized", frac_model},
                             {"read_roofline_fraction", frac_read},
                             {"int8_roofline_fraction", frac_int8}});
  }
  if (!args.Str("contexts").empty()) {
    // Batch-1 steps at each context, in rounds that visit every context in
    // turn (a shared machine's slow spells then hit them alike); the best
    // round per context is kept. The ratio is to the first context.
    absl::StatusOr<std::vector<int32_t>> context_list = args.PositiveIntList("contexts");
    if (!context_list.ok()) return Fail(context_list.status());
    const std::vector<int32_t>& contexts = *context_list;
    std::vector<double> best(contexts.size(), 1e30);
    for (int round = 0; round < 3; ++round) {
      for (size_t i = 0; i < contexts.size(); ++i) {
        absl::StatusOr<DecodeResult> r = BenchDecode(rt->get(), 1, contexts[i], static_cast<int>(*steps));
        if (!r.ok()) return Fail(r.status());
        best[i] = std::min(best[i], r->step_ms);
      }
    }
    std::printf("\n%8s %10s %12s %10s\n", "context", "step ms", "tokens/s", "vs first");
    for (size_t i = 0; i < contexts.size(); ++i) {
      std::printf("%8d %10.2f %12.1f %9.2fx\n", contexts[i] + 1, best[i], 1e3 / best[i], best[i] / best[0]);
      out["contexts"].push_back({{"context", contexts[i] + 1},
                                 {"step_ms", best[i]},
                                 {"tokens_per_second", 1e3 / best[i]},
                                 {"vs_first", best[i] / best[0]}});
    }
  }
  if (!args.Str("json").empty()) std::ofstream(args.Str("json")) << out.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-bench", &beacon::Main, argc, argv); }
