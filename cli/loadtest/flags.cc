#include "cli/loadtest/flags.h"

#include <cmath>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "loadtest/arrival.h"
#include "loadtest/dataset.h"
#include "loadtest/http_client.h"
#include "util/cli_args.h"
#include "util/status_macros.h"

namespace beacon::loadtest {
namespace {

void Declare(cli::Args* a) {
  a->Declare("backend", false, "grpc", "");
  a->Declare("server", false, "127.0.0.1:50051", "");
  a->Declare("model", false, "", "");
  a->Declare("continuous-usage", true, "", "");
  a->Declare("api-key", false, "", "");
  a->Declare("tls-ca", false, "", "");
  a->Declare("connections", false, "4", "");
  a->Declare("timeout-s", false, "600", "");
  a->Declare("connect-timeout-s", false, "10", "");
  a->Declare("rate", false, "", "");
  a->Declare("burstiness", false, "1", "");
  a->Declare("concurrency", false, "", "");
  a->Declare("requests", false, "", "");
  a->Declare("duration-s", false, "", "");
  a->Declare("warmup", false, "0", "");
  a->Declare("seed", false, "0", "");
  a->Declare("prompt-len", false, "fixed:128", "");
  a->Declare("output-len", false, "fixed:128", "");
  a->Declare("ignore-eos", true, "", "");
  a->Declare("prompts", false, "", "");
  a->Declare("dataset", false, "", "");
  a->Declare("dataset-sample", false, "0", "");
  a->Declare("reference-output-len", true, "", "");
  a->Declare("kv-mix", false, "", "");
  a->Declare("kv-policy", false, "", "");
  a->Declare("kv-budget", false, "", "");
  a->Declare("temperature", false, "0", "");
  a->Declare("slo", false, "", "");
  a->Declare("waves", false, "", "");
  a->Declare("slo-attainment", false, "0.9", "");
  a->Declare("stop-after-fails", false, "1", "");
  a->Declare("json", false, "", "");
  a->Declare("json-format", false, "beacon", "");
  a->Declare("csv", false, "", "");
  a->Declare("plot", false, "", "");
  a->Declare("label", false, "", "");
  a->Declare("from", false, "", "");
  a->Declare("names", false, "", "");
  a->Declare("quiet", true, "", "");
  a->Declare("help", true, "", "");
}

absl::StatusOr<double> Number(const cli::Args& a, const char* flag, double lo, bool lo_inclusive) {
  absl::StatusOr<double> v = a.Double(flag);
  if (!v.ok()) return v.status();
  if (std::isnan(*v) || (lo_inclusive ? *v < lo : *v <= lo) || std::isinf(*v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be a number ", lo_inclusive ? ">= " : "> ", lo, ", got '", a.Str(flag), "'"));
  }
  return *v;
}

absl::StatusOr<int64_t> Integer(const cli::Args& a, const char* flag, int64_t lo, int64_t hi) {
  absl::StatusOr<int64_t> v = a.Int(flag);
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be in [", lo, ", ", hi, "], got ", *v));
  }
  return *v;
}

}  // namespace

absl::StatusOr<std::vector<double>> ParseLevels(absl::string_view spec, bool integer, absl::string_view flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": ", why, " in '", spec, "' (expected a list such as 1,2,4,8 or a range START:STOP:+STEP / :xFACTOR)"));
  };
  auto num = [&](absl::string_view s, double* v) {
    return absl::SimpleAtod(s, v) && std::isfinite(*v) && *v > 0 && (!integer || *v == std::floor(*v));
  };
  const char* what = integer ? "an integer >= 1" : "a positive number";
  std::vector<double> out;
  std::vector<absl::string_view> range = absl::StrSplit(spec, ':');
  if (range.size() == 3) {
    double start, stop, step;
    if (!num(range[0], &start) || !num(range[1], &stop)) return bad(absl::StrCat("START and STOP must be ", what));
    if (stop < start) return bad("STOP must be >= START");
    const bool geometric = !range[2].empty() && (range[2][0] == 'x' || range[2][0] == '*');
    const bool additive = !range[2].empty() && range[2][0] == '+';
    if (!geometric && !additive) return bad("the step must start with '+' or 'x'");
    if (!absl::SimpleAtod(range[2].substr(1), &step) || !std::isfinite(step) || (geometric ? step <= 1 : step <= 0)) {
      return bad(geometric ? "FACTOR must be > 1" : "STEP must be > 0");
    }
    for (double v = start; v <= stop * (1 + 1e-9) && out.size() < 1000; v = geometric ? v * step : v + step) {
      out.push_back(integer ? std::round(v) : v);
    }
    if (out.size() >= 1000) return bad("more than 1000 levels");
  } else if (range.size() == 1) {
    for (absl::string_view p : absl::StrSplit(spec, ',')) {
      double v;
      if (!num(p, &v)) return bad(absl::StrCat("'", p, "' is not ", what));
      out.push_back(v);
    }
  } else {
    return bad("malformed");
  }
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i] <= out[i - 1]) return bad("levels must be ascending and distinct");
  }
  return out;
}

namespace {

// `beacon-loadtest plot`: the sweep files to draw and the output.
absl::Status ParsePlot(const cli::Args& a, Config* out) {
  Config& c = *out;
  c.plot_from = absl::StrSplit(a.Str("from"), ',', absl::SkipEmpty());
  if (c.plot_from.empty()) return absl::InvalidArgumentError("plot needs --from SWEEP.json[,SWEEP2.json...]");
  c.plot_path = a.Str("plot");
  if (c.plot_path.empty()) return absl::InvalidArgumentError("plot needs --plot OUT.png");
  if (a.Has("names")) {
    c.plot_names = absl::StrSplit(a.Str("names"), ',');
    if (c.plot_names.size() != c.plot_from.size()) {
      return absl::InvalidArgumentError("--names needs one name per --from file");
    }
  }
  return absl::OkStatus();
}

// The server and how to reach it.
absl::Status ParseClient(const cli::Args& a, Config* out) {
  Config& c = *out;
  BEACON_ASSIGN_OR_RETURN(c.client.backend, ParseBackend(a.Str("backend")));
  const bool http = c.client.backend != Backend::kGrpc;
  c.client.server = http && !a.Has("server") ? "http://127.0.0.1:8080" : a.Str("server");
  if (c.client.server.empty()) return absl::InvalidArgumentError("--server is empty");
  if (http) {
    if (absl::StatusOr<HttpUrl> u = ParseHttpUrl(c.client.server); !u.ok()) return u.status();
    if (a.Has("tls-ca")) return absl::InvalidArgumentError("--tls-ca is for --backend grpc (HTTP backends: http://)");
  } else {
    for (const char* f : {"model", "continuous-usage"}) {
      if (a.Has(f)) return absl::InvalidArgumentError(absl::StrCat("--", f, " is for --backend openai / openai-chat"));
    }
    if (absl::StartsWith(c.client.server, "http://") || absl::StartsWith(c.client.server, "https://")) {
      return absl::InvalidArgumentError(
          "--server: a URL is for --backend openai / openai-chat; --backend grpc takes HOST:PORT");
    }
  }
  c.client.model = a.Str("model");
  c.client.continuous_usage = a.Flag("continuous-usage");
  c.client.api_key = a.Str("api-key");
  if (a.Has("tls-ca")) {
    std::ifstream in(a.Str("tls-ca"));
    if (!in) return absl::NotFoundError(absl::StrCat("--tls-ca: cannot read ", a.Str("tls-ca")));
    c.client.tls_ca_pem.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  BEACON_ASSIGN_OR_RETURN(c.client.connections, Integer(a, "connections", 1, 256));
  BEACON_ASSIGN_OR_RETURN(c.client.timeout_s, Number(a, "timeout-s", 0, false));
  BEACON_ASSIGN_OR_RETURN(c.client.connect_timeout_s, Number(a, "connect-timeout-s", 0, false));

  return absl::OkStatus();
}

// The load shape: open or closed loop, how many requests, the seed.
absl::Status ParseLoad(const cli::Args& a, Config* out) {
  Config& c = *out;
  const bool has_rate = a.Has("rate"), has_conc = a.Has("concurrency");
  if (has_rate && has_conc) {
    return absl::InvalidArgumentError("give --rate (open loop) or --concurrency (closed loop), not both");
  }
  if (!has_rate && !has_conc) {
    return absl::InvalidArgumentError("give --rate R (open loop, requests/s) or --concurrency N (closed loop)");
  }
  c.by_concurrency = has_conc;
  BEACON_ASSIGN_OR_RETURN(c.load.burstiness, Number(a, "burstiness", 0, false));
  if (a.Has("burstiness") && has_conc) {
    return absl::InvalidArgumentError("--burstiness shapes open-loop arrivals: use it with --rate");
  }
  if (c.sweep) {
    BEACON_ASSIGN_OR_RETURN(c.levels, ParseLevels(a.Str(has_rate ? "rate" : "concurrency"), has_conc,
                                                  has_rate ? "--rate" : "--concurrency"));
    if (has_conc && c.levels.back() > 100000) return absl::InvalidArgumentError("--concurrency: at most 100000");
  } else if (has_rate) {
    BEACON_ASSIGN_OR_RETURN(c.load.rate, a.Double("rate"));
    if (absl::Status s = ValidateArrival(c.load.rate, c.load.burstiness); !s.ok()) return s;
  } else {
    BEACON_ASSIGN_OR_RETURN(c.load.concurrency, Integer(a, "concurrency", 1, 100000));
  }
  if (a.Has("requests") && a.Has("duration-s")) {
    return absl::InvalidArgumentError("give --requests or --duration-s, not both");
  }
  if (a.Has("waves")) {
    if (!c.sweep || !has_conc) {
      return absl::InvalidArgumentError("--waves sizes each level of a closed-loop sweep (sweep --concurrency ...)");
    }
    if (a.Has("requests") || a.Has("duration-s")) {
      return absl::InvalidArgumentError("give --waves or --requests / --duration-s, not both");
    }
    BEACON_ASSIGN_OR_RETURN(c.waves, Integer(a, "waves", 1, 1000));
    c.load.requests = c.waves;  // per level: waves x the level's concurrency (sweep.cc)
  } else if (a.Has("duration-s")) {
    BEACON_ASSIGN_OR_RETURN(c.load.duration_s, Number(a, "duration-s", 0, false));
  } else if (a.Has("requests")) {
    BEACON_ASSIGN_OR_RETURN(c.load.requests, Integer(a, "requests", 1, int64_t{1} << 40));
  } else {
    c.load.requests = 100;
  }
  BEACON_ASSIGN_OR_RETURN(c.load.warmup, Integer(a, "warmup", 0, int64_t{1} << 40));
  int64_t seed = 0;
  BEACON_ASSIGN_OR_RETURN(seed, Integer(a, "seed", 0, INT64_MAX));
  c.load.seed = static_cast<uint64_t>(seed);
  c.load.progress = !a.Flag("quiet");

  return absl::OkStatus();
}

// What each request asks: lengths or a dataset, sampling, the KV mix.
absl::Status ParseWorkload(const cli::Args& a, Config* out) {
  Config& c = *out;
  WorkloadOptions& w = c.workload;
  w.seed = c.load.seed;
  BEACON_ASSIGN_OR_RETURN(w.prompt_len, LengthDist::Parse(a.Str("prompt-len"), "--prompt-len"));
  BEACON_ASSIGN_OR_RETURN(w.output_len, LengthDist::Parse(a.Str("output-len"), "--output-len"));
  w.ignore_eos = a.Flag("ignore-eos");
  if (a.Has("prompts") && a.Has("dataset")) {
    return absl::InvalidArgumentError("give --dataset or --prompts (the same as --dataset jsonl:FILE), not both");
  }
  if (a.Has("prompts") || a.Has("dataset")) {
    if (a.Has("prompt-len")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt-len sets synthetic prompts: not with --", a.Has("prompts") ? "prompts" : "dataset"));
    }
  }
  if (a.Has("prompts")) {
    BEACON_ASSIGN_OR_RETURN(w.prompts, LoadPromptsJsonl(a.Str("prompts")));
    c.dataset = "jsonl";
  } else if (a.Has("dataset")) {
    DatasetSpec spec;
    BEACON_ASSIGN_OR_RETURN(spec, ParseDatasetSpec(a.Str("dataset")));
    BEACON_ASSIGN_OR_RETURN(w.prompts, LoadDataset(spec));
    c.dataset = a.Str("dataset").substr(0, a.Str("dataset").find(':'));
    // An explicit --output-len overrides the lengths the file gives (as
    // vLLM's --sharegpt-output-len / --custom-output-len do). --prompts keeps
    // its older rule: a line's max_tokens wins.
    if (a.Has("output-len")) {
      for (PromptEntry& e : w.prompts) e.max_tokens = 0;
    }
  }
  if (a.Has("dataset-sample")) {
    if (w.prompts.empty()) return absl::InvalidArgumentError("--dataset-sample needs --dataset (or --prompts)");
    int64_t n = 0;
    BEACON_ASSIGN_OR_RETURN(n, Integer(a, "dataset-sample", 1, INT32_MAX));
    BEACON_ASSIGN_OR_RETURN(w.prompts, SampleDataset(std::move(w.prompts), n, c.load.seed));
  }
  if (a.Flag("reference-output-len")) {
    if (c.dataset != "sharegpt") {
      return absl::InvalidArgumentError(
          "--reference-output-len takes ShareGPT reference answers: --dataset sharegpt:FILE");
    }
    if (a.Has("output-len")) {
      return absl::InvalidArgumentError("give --reference-output-len or --output-len, not both");
    }
    c.reference_output_len = true;
  }
  if (c.client.backend == Backend::kOpenAiChat && w.prompts.empty()) {
    return absl::InvalidArgumentError(
        "--backend openai-chat sends text: synthetic token-id prompts need --backend openai or grpc, or give "
        "--dataset");
  }
  if (c.client.backend == Backend::kOpenAi) {
    for (const PromptEntry& e : w.prompts) {
      if (!e.chat.empty()) {
        return absl::InvalidArgumentError(
            "the prompts file has chat \"messages\": use --backend openai-chat (or grpc) for them");
      }
    }
  }
  double temp = 0;
  BEACON_ASSIGN_OR_RETURN(temp, Number(a, "temperature", 0, true));
  w.temperature = static_cast<float>(temp);
  if (a.Has("kv-mix")) {
    if (a.Has("kv-policy") || a.Has("kv-budget")) {
      return absl::InvalidArgumentError("give --kv-mix or --kv-policy/--kv-budget, not both");
    }
    BEACON_ASSIGN_OR_RETURN(w.kv_mix, ParseKvMix(a.Str("kv-mix")));
  } else if (a.Has("kv-policy") || a.Has("kv-budget")) {
    std::string spec = a.Has("kv-policy") ? a.Str("kv-policy") : "default";
    if (a.Has("kv-budget")) {
      int64_t budget = 0;
      BEACON_ASSIGN_OR_RETURN(budget, Integer(a, "kv-budget", 1, INT32_MAX));
      absl::StrAppend(&spec, "@", budget);
    }
    BEACON_ASSIGN_OR_RETURN(w.kv_mix, ParseKvMix(spec, "--kv-policy"));
    if (w.kv_mix.size() != 1) return absl::InvalidArgumentError("--kv-policy takes one policy (use --kv-mix)");
  }

  return absl::OkStatus();
}

// The SLO a sweep judges by, and where the results go.
absl::Status ParseReports(const cli::Args& a, Config* out) {
  Config& c = *out;
  if (a.Has("slo")) {
    BEACON_ASSIGN_OR_RETURN(c.slo, ParseSlo(a.Str("slo")));
  }
  BEACON_ASSIGN_OR_RETURN(c.slo_attainment, Number(a, "slo-attainment", 0, false));
  if (c.slo_attainment > 1) return absl::InvalidArgumentError("--slo-attainment must be in (0, 1]");
  BEACON_ASSIGN_OR_RETURN(c.stop_after_fails, Integer(a, "stop-after-fails", 1, 1000));
  if (c.sweep && c.slo.empty()) {
    return absl::InvalidArgumentError("sweep needs --slo (e.g. --slo ttft_ms=1000,tpot_ms=50) to judge each level");
  }
  if (!c.sweep) {
    for (const char* f : {"plot", "slo-attainment", "stop-after-fails"}) {
      if (a.Has(f)) return absl::InvalidArgumentError(absl::StrCat("--", f, " belongs to `beacon-loadtest sweep`"));
    }
  }
  c.json_path = a.Str("json");
  c.json_format = a.Str("json-format");
  if (c.json_format != "beacon" && c.json_format != "vllm") {
    return absl::InvalidArgumentError(absl::StrCat("--json-format must be beacon or vllm, got '", c.json_format, "'"));
  }
  if (c.json_format == "vllm" && c.sweep) {
    return absl::InvalidArgumentError("--json-format vllm describes one run: not with sweep");
  }
  c.csv_path = a.Str("csv");
  c.plot_path = a.Str("plot");
  c.label = a.Str("label");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(int argc, char** argv) {
  Config c;
  for (int i = 0; i < argc; ++i) absl::StrAppend(&c.command_line, i > 0 ? " " : "", argv[i]);
  cli::Args a;
  Declare(&a);
  if (absl::Status s = a.Parse(argc, argv); !s.ok()) return s;
  if (a.Flag("help")) {
    c.help = true;
    return c;
  }
  if (absl::Status s = a.LoadEnvironment("BEACON_LOADTEST_"); !s.ok()) return s;
  std::vector<std::string> pos = a.positional();
  if (!pos.empty() && (pos[0] == "run" || pos[0] == "sweep" || pos[0] == "plot")) {
    c.sweep = pos[0] == "sweep";
    c.plot_only = pos[0] == "plot";
    pos.erase(pos.begin());
  }
  if (!pos.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", pos[0], "' (commands: run, sweep, plot; options start with --)"));
  }
  if (c.plot_only) {
    if (absl::Status s = ParsePlot(a, &c); !s.ok()) return s;
    return c;
  }
  for (const char* f : {"from", "names"}) {
    if (a.Has(f)) return absl::InvalidArgumentError(absl::StrCat("--", f, " belongs to `beacon-loadtest plot`"));
  }

  for (auto* part : {ParseClient, ParseLoad, ParseWorkload, ParseReports}) {
    if (absl::Status s = part(a, &c); !s.ok()) return s;
  }
  return c;
}

}  // namespace beacon::loadtest
