#include "cli/plan/plan_flags.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/hf_config.h"
#include "planner/gpu_profile.h"
#include "planner/plan_run.h"
#include "planner/reproduce.h"
#include "planner/slo.h"
#include "planner/workload.h"
#include "util/status_macros.h"

namespace beacon::planner {
namespace {

absl::StatusOr<int64_t> IntFlag(const cli::Args& a, const std::string& name, int64_t lo, int64_t hi) {
  absl::StatusOr<int64_t> v = a.Int(name);
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi)
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [", lo, ", ", hi, "], got ", *v));
  return *v;
}

absl::StatusOr<double> NumFlag(const cli::Args& a, const std::string& name, double lo, double hi) {
  absl::StatusOr<double> v = a.Double(name);
  if (!v.ok()) return v.status();
  if (!(*v >= lo && *v <= hi))
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [", lo, ", ", hi, "], got ", *v));
  return *v;
}

absl::StatusOr<std::vector<KvPolicyOptions>> ParseConfigs(const cli::Args& a) {
  std::vector<KvPolicyOptions> out;
  std::vector<int32_t> budgets;
  for (absl::string_view b : absl::StrSplit(a.Str("kv-budget"), ',', absl::SkipEmpty())) {
    int32_t v;
    if (!absl::SimpleAtoi(b, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--kv-budget: '", b, "' is not a budget >= 1"));
    }
    budgets.push_back(v);
  }
  if (budgets.empty()) return absl::InvalidArgumentError("--kv-budget: give at least one budget");
  for (absl::string_view p : absl::StrSplit(a.Str("kv-policy"), ',', absl::SkipEmpty())) {
    absl::StatusOr<KvPolicyOptions> defaults = KvPolicyOptions::DefaultsForName(std::string_view(p.data(), p.size()));
    if (!defaults.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kv-policy ", std::string(p), ": ", defaults.status().message()));
    }
    KvPolicyOptions base = *std::move(defaults);
    BEACON_ASSIGN_OR_RETURN(base.interval, IntFlag(a, "kv-interval", 1, 1 << 20));
    base.keep_prompt = a.Flag("kv-keep-prompt");
    if (a.Has("kv-recent-queries"))
      BEACON_ASSIGN_OR_RETURN(base.recent_queries, IntFlag(a, "kv-recent-queries", 1, 1024));
    if (a.Has("kv-beacons")) BEACON_ASSIGN_OR_RETURN(base.beacons, IntFlag(a, "kv-beacons", 1, 4095));
    const std::string f = a.Str("kv-beacon-filter");
    if (f != "all" && f != "global") return absl::InvalidArgumentError("--kv-beacon-filter must be all or global");
    base.beacon_filter = f == "all" ? BeaconFilter::kAll : BeaconFilter::kGlobal;
    for (int32_t b : base.compresses() ? budgets : std::vector<int32_t>{base.budget}) {
      KvPolicyOptions o = base;
      o.budget = b;
      if (absl::Status s = o.Validate(); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--kv-policy ", std::string(p), ": ", s.message()));
      }
      out.push_back(o);
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("--kv-policy: give at least one policy");
  return out;
}

// --model and --gpu (or --reproduce's, which fixes the workload flags too).
absl::Status ParseModelAndGpu(const cli::Args& a, PlanSetup* s, PublishedSetup* published) {
  const ShippedRoots roots = DefaultShippedRoots(a.Str("gpu-profile-dir"));
  std::string model_path = a.Str("model"), gpu = a.Str("gpu");
  if (s->reproduce) {
    for (const char* f : {"model", "gpu", "rate", "concurrency", "requests", "output-len", "max-tokens", "kv-policy",
                          "kv-budget", "kv-interval", "kv-keep-prompt", "slo", "target-rate", "kv-pool-gb"}) {
      if (a.Has(f)) return absl::InvalidArgumentError(absl::StrCat("--reproduce fixes --", f, ": drop it"));
    }
    absl::StatusOr<LengthDist> p = LengthDist::Parse(a.Str("prompt-len"), "--prompt-len");
    if (!p.ok()) return p.status();
    if (p->kind() != LengthDist::Kind::kFixed) {
      return absl::InvalidArgumentError("--prompt-len: --reproduce takes a fixed prompt length (fixed:N)");
    }
    s->prompt_tokens = static_cast<int32_t>(p->Mean());  // fixed: the length
    *published = MakePublishedSetup(s->prompt_tokens);
    model_path = FindShippedFile(published->model, roots);
    if (model_path.empty()) return absl::NotFoundError(absl::StrCat("cannot find ", published->model));
    gpu = published->gpu;
  }
  if (model_path.empty())
    return absl::InvalidArgumentError("--model: give a model's config.json (e.g. configs/qwen3-4b.json)");
  if (std::filesystem::is_directory(model_path))
    model_path = (std::filesystem::path(model_path) / "config.json").string();
  HfConfigOptions hf;
  hf.ignore_unsupported_features = true;  // only the shapes matter here
  absl::StatusOr<ModelConfig> mc = ParseHfConfigFile(model_path, hf);
  if (!mc.ok()) return mc.status();
  double wbytes, kvbytes;
  BEACON_ASSIGN_OR_RETURN(wbytes, NumFlag(a, "weight-bytes", 0.25, 4));
  BEACON_ASSIGN_OR_RETURN(kvbytes, NumFlag(a, "kv-bytes", 0.25, 4));
  s->report.model = ModelCostFromConfig(*mc, wbytes, kvbytes);
  BEACON_ASSIGN_OR_RETURN(s->report.gpu, LoadGpuProfile(gpu, roots));
  return absl::OkStatus();
}

// --mem-fraction or --kv-pool-gb, --kv-block-size. REQUIRES r's model and gpu.
absl::Status ParsePool(const cli::Args& a, PlanReport* r) {
  PoolSpec pool;
  BEACON_ASSIGN_OR_RETURN(pool.mem_fraction, NumFlag(a, "mem-fraction", 0.01, 1));
  if (a.Has("kv-pool-gb")) {
    double gb;
    BEACON_ASSIGN_OR_RETURN(gb, NumFlag(a, "kv-pool-gb", 1e-6, 1e5));
    pool.kv_pool_bytes = gb * 1e9;
  }
  int64_t bs;
  BEACON_ASSIGN_OR_RETURN(bs, IntFlag(a, "kv-block-size", 1, 4096));
  pool.block_size = static_cast<int32_t>(bs);
  BEACON_ASSIGN_OR_RETURN(r->pool, ResolvePool(pool, r->gpu, r->model));
  return absl::OkStatus();
}

// beacon-serve's scheduler flags.
absl::Status ParseScheduler(const cli::Args& a, SchedulerConfig* c) {
  int64_t v;
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "max-running", 1, 1 << 20));
  c->max_running = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "max-waiting", 0, 1 << 30));
  c->max_waiting = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "max-step-tokens", 1, 1 << 24));
  c->max_step_tokens = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "prefill-chunk", 1, 1 << 24));
  c->prefill_chunk = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(c->admission, ParseAdmissionMode(a.Str("admission")));
  return c->Validate();
}

// The workload: arrivals (--rate or --concurrency), lengths, prefix sharing.
// REQUIRES r's model and scheduler.
absl::Status ParseWorkload(const cli::Args& a, PlanReport* r) {
  WorkloadSpec& w = r->workload;
  int64_t v;
  if (a.Has("rate") && a.Has("concurrency")) {
    return absl::InvalidArgumentError("give --rate (open loop) or --concurrency (closed loop), not both");
  }
  if (a.Has("rate")) {
    w.arrival = ArrivalKind::kPoisson;
    BEACON_ASSIGN_OR_RETURN(w.rate, NumFlag(a, "rate", 1e-9, 1e9));
    if (!(w.rate > 0)) return absl::InvalidArgumentError("--rate must be > 0");
  } else {
    w.arrival = ArrivalKind::kClosedLoop;
    w.concurrency = r->sched.max_running;
    if (a.Has("concurrency")) {
      BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "concurrency", 1, 1 << 20));
      w.concurrency = static_cast<int32_t>(v);
    }
  }
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "requests", 1, 10'000'000));
  w.num_requests = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(w.prompt, LengthDist::Parse(a.Str("prompt-len"), "--prompt-len"));
  BEACON_ASSIGN_OR_RETURN(w.output, LengthDist::Parse(a.Str("output-len"), "--output-len"));
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "max-tokens", 0, INT32_MAX / 2));
  w.max_tokens = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "seed", 0, INT64_MAX));
  w.seed = static_cast<uint64_t>(v);
  BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "shared-prefix", 0, INT32_MAX / 2));
  w.shared_prefix = static_cast<int32_t>(v);
  BEACON_ASSIGN_OR_RETURN(w.share_ratio, NumFlag(a, "share-ratio", 0, 1));
  r->prefix_cache = a.Flag("prefix-cache");
  if (w.prompt.kind() == LengthDist::Kind::kFixed && w.prompt.Mean() >= r->model.context_length) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt-len ", w.prompt.ToString(),
                                                   " does not fit the model's context (", r->model.context_length,
                                                   " tokens)"));
  }
  return absl::OkStatus();
}

// --slo and what only makes sense with it.
absl::Status ParseSloFlags(const cli::Args& a, PlanSetup* s) {
  PlanReport& r = s->report;
  if (a.Has("slo")) {
    double att;
    BEACON_ASSIGN_OR_RETURN(att, NumFlag(a, "slo-attainment", 0, 1));
    BEACON_ASSIGN_OR_RETURN(r.slo, ParseSlo(a.Str("slo"), att));
    if (a.Has("slo-requests")) {
      int64_t v;
      BEACON_ASSIGN_OR_RETURN(v, IntFlag(a, "slo-requests", 1, 10'000'000));
      s->slo_requests = static_cast<int32_t>(v);
    }
  } else {
    for (const char* f : {"slo-requests", "target-rate", "slo-attainment"}) {
      if (a.Has(f))
        return absl::InvalidArgumentError(absl::StrCat("--", f, " needs --slo (e.g. --slo ttft_ms=2000,tpot_ms=50)"));
    }
  }
  if (a.Has("target-rate")) BEACON_ASSIGN_OR_RETURN(r.target_rate, NumFlag(a, "target-rate", 1e-9, 1e9));
  return absl::OkStatus();
}

}  // namespace

void DeclarePlanFlags(cli::Args* a) {
  a->Declare("model", false, "", "HF config.json (or its directory) of a llama, qwen2 or qwen3 model");
  a->Declare("gpu", false, "h200", "GPU profile: a shipped name (h200, h100-sxm) or a profile file");
  a->Declare("gpu-profile-dir", false, "",
             "look for shipped GPU profiles (<name>.json) here first, then in ./configs/gpus and the source tree");
  a->Declare("mem-fraction", false, "0.9", "share of GPU memory for weights + runtime reserve + KV pool");
  a->Declare("kv-pool-gb", false, "", "KV pool in GB (1e9 bytes), instead of --mem-fraction");
  a->Declare("kv-block-size", false, "16", "KV slots per block (beacon-serve --kv-block-size)");
  a->Declare("weight-bytes", false, "2", "bytes per weight (2 = bf16, 1 = fp8)");
  a->Declare("kv-bytes", false, "2", "bytes per cached K/V element (2 = bf16, 1 = fp8)");
  a->Declare("kv-policy", false, "full,beacon", "comma-separated KV policies, one configuration each");
  a->Declare("kv-budget", false, "2048", "comma-separated budgets: each compressing policy runs at each");
  a->Declare("kv-interval", false, "128", "decode steps between evictions");
  a->Declare("kv-keep-prompt", true, "true", "never evict prompt tokens");
  a->Declare("kv-recent-queries", false, "", "R: recent scoring queries (default: the policy's published value)");
  a->Declare("kv-beacons", false, "", "K: beacon queries per head (beacon; default 16)");
  a->Declare("kv-beacon-filter", false, "all", "all or global (global observes attention: costs bandwidth)");
  a->Declare("rate", false, "", "open loop: Poisson arrivals, requests/s");
  a->Declare("concurrency", false, "", "closed loop: clients (default: max-running, i.e. saturation)");
  a->Declare("requests", false, "64", "requests per run");
  a->Declare("prompt-len", false, "fixed:256",
             "prompt tokens: fixed:N, uniform:A:B, normal:MEAN:STD, lognormal:MEAN:STD");
  a->Declare("output-len", false, "fixed:4096", "output tokens generated per request (same forms)");
  a->Declare("max-tokens", false, "0", "requests' max_tokens (0: each request's output length)");
  a->Declare("shared-prefix", false, "0", "tokens of a prefix (system prompt) that --share-ratio of requests share");
  a->Declare("share-ratio", false, "1", "fraction of requests (0..1) whose prompt starts with the shared prefix");
  a->Declare("prefix-cache", true, "true", "beacon-serve --prefix-cache");
  a->Declare("seed", false, "1", "seed of the lengths and arrivals");
  a->Declare("max-running", false, "64", "beacon-serve --max-running");
  a->Declare("max-waiting", false, "1024", "beacon-serve --max-waiting (Poisson arrivals past it are rejected)");
  a->Declare("max-step-tokens", false, "512", "beacon-serve --max-step-tokens");
  a->Declare("prefill-chunk", false, "256", "beacon-serve --prefill-chunk");
  a->Declare("admission", false, "reserve", "beacon-serve --admission: reserve or optimistic");
  a->Declare("slo", false, "", "SLO bounds, e.g. ttft_ms=2000,tpot_ms=50 (enables the replicas search)");
  a->Declare("slo-attainment", false, "0.9", "share of requests that must meet every SLO bound");
  a->Declare("slo-requests", false, "", "requests per SLO probe run (default: max(--requests, 4 x --max-running))");
  a->Declare("target-rate", false, "", "requests/s over all replicas to size for (with --slo)");
  a->Declare("reproduce", true, "false", "the published efficiency table (Qwen3-4B, 32K outputs, batch 16, H200)");
  a->Declare("json", false, "", "write the report as JSON to this file ('-': stdout, instead of the table)");
  a->Declare("out-dir", false, "", "write CSV series (and PNG plots) here");
  a->Declare("quiet", true, "false", "no progress on stderr");
}

absl::StatusOr<PlanSetup> ParsePlanSetup(const cli::Args& a) {
  if (!a.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", a.positional()[0], "' (options start with --)"));
  }
  PlanSetup s;
  s.reproduce = a.Flag("reproduce");
  s.quiet = a.Flag("quiet");
  s.json_path = a.Str("json");
  s.out_dir = a.Str("out-dir");
  PlanReport& r = s.report;
  PublishedSetup published;
  if (absl::Status st = ParseModelAndGpu(a, &s, &published); !st.ok()) return st;
  if (absl::Status st = ParsePool(a, &r); !st.ok()) return st;
  if (absl::Status st = ParseScheduler(a, &r.sched); !st.ok()) return st;
  if (s.reproduce) {
    r.workload = published.workload;
    s.configs = published.configs;
  } else {
    if (absl::Status st = ParseWorkload(a, &r); !st.ok()) return st;
    BEACON_ASSIGN_OR_RETURN(s.configs, ParseConfigs(a));
  }
  if (absl::Status st = r.workload.Validate(); !st.ok()) return st;
  if (absl::Status st = ParseSloFlags(a, &s); !st.ok()) return st;
  return s;
}

}  // namespace beacon::planner
