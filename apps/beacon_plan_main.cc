// beacon-plan: capacity planning without a GPU. Runs beacon-serve's own
// scheduler and KV accounting against a roofline cost model of a GPU, for
// each KV configuration asked, and reports memory, admitted concurrency,
// throughput, latency and (for an SLO) replicas. docs/capacity.md.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/plan/plan_flags.h"
#include "model/hf_config.h"
#include "planner/gpu_profile.h"
#include "planner/plots.h"
#include "planner/report.h"
#include "planner/reproduce.h"
#include "util/cli_args.h"
#include "util/run_main.h"
#include "util/status_macros.h"

namespace beacon::planner {
namespace {

std::string Label(const KvPolicyOptions& kv) {
  const std::string name(kv.policy_name());
  return kv.compresses() ? absl::StrCat(name, " b=", kv.budget) : name;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "beacon-plan: %s\n", std::string(s.message()).c_str());
  const bool usage = absl::IsInvalidArgument(s) || absl::IsNotFound(s);
  return usage ? 2 : 1;
}

int Main(int argc, char** argv) {
  cli::Args a;
  DeclarePlanFlags(&a);
  if (absl::Status s = a.Parse(argc, argv); !s.ok()) return Fail(s);
  if (a.help()) {
    std::printf("%s", a.Help("beacon-plan: KV capacity and replicas from beacon-serve's scheduler on a GPU cost model\n"
                             "usage: beacon-plan --model configs/qwen3-4b.json --gpu h200 --output-len fixed:32768 "
                             "--kv-policy full,beacon --kv-budget 1024,2048,4096 [--slo ttft_ms=..,tpot_ms=.. "
                             "--target-rate R]\n"
                             "       beacon-plan --reproduce\n"
                             "Every option is also read from BEACON_PLAN_<OPTION> (e.g. BEACON_PLAN_GPU).")
                          .c_str());
    return 0;
  }
  if (absl::Status s = a.LoadEnvironment("BEACON_PLAN_"); !s.ok()) return Fail(s);
  absl::StatusOr<PlanSetup> setup = ParsePlanSetup(a);
  if (!setup.ok()) return Fail(setup.status());
  PlanReport& report = setup->report;
  const bool tty = isatty(fileno(stderr)) != 0;
  const bool quiet = setup->quiet;
  const size_t n_configs = setup->configs.size();

  for (size_t i = 0; i < n_configs; ++i) {
    ConfigResult c;
    c.kv = setup->configs[i];
    c.label = Label(c.kv);
    const std::string tag = absl::StrFormat("[%d/%d] %s", i + 1, n_configs, c.label);
    absl::StatusOr<ResolvedPool> pool = PoolForPolicy(report.pool, c.kv, report.model, report.sched.max_running);
    if (!pool.ok())
      return Fail(absl::Status(pool.status().code(), absl::StrCat(c.label, ": ", pool.status().message())));
    c.pool = *pool;
    RunInputs in{report.model, report.gpu, *pool, report.sched, c.kv, report.workload, report.prefix_cache};
    ProgressFn progress = nullptr;
    if (!quiet && tty) {
      progress = [&](const Progress& p) {
        std::fprintf(stderr, "\r%s: %d/%d requests, virtual %.1f s, running %d, waiting %d (%.1f s)   ", tag.c_str(),
                     p.done, p.total, p.virtual_s, p.running, p.waiting, p.wall_s);
      };
    }
    absl::StatusOr<RunResult> run = RunPlan(in, progress);
    if (!run.ok()) {
      if (!quiet && tty) std::fprintf(stderr, "\n");
      return Fail(absl::Status(run.status().code(), absl::StrCat(c.label, ": ", run.status().message())));
    }
    c.run = std::move(*run);
    if (!quiet) {
      std::fprintf(stderr, "%s%s: %d requests, %.1f output tok/s, peak KV %.2f GiB, admitted %d (%.1f s)\n",
                   tty ? "\r" : "", tag.c_str(), c.run.completed, c.run.output_tokens_per_s,
                   c.run.peak_kv_bytes / (1024.0 * 1024 * 1024), c.run.peak_running, c.run.wall_s);
    }
    if (report.slo.enabled()) {
      SearchOptions opt;
      opt.requests = setup->slo_requests;
      auto say = [&](const std::string& m) {
        if (!quiet) std::fprintf(stderr, "%s  SLO search: %s\n", tag.c_str(), m.c_str());
      };
      absl::StatusOr<CapacityResult> cap = FindMaxRate(in, report.slo, opt, say);
      if (!cap.ok())
        return Fail(absl::Status(cap.status().code(), absl::StrCat(c.label, ": ", cap.status().message())));
      c.has_capacity = true;
      c.capacity = *cap;
      c.replicas = ReplicasFor(report.target_rate, c.capacity.max_rate);
    }
    report.configs.push_back(std::move(c));
  }
  if (report.slo.enabled()) {
    double top = 1.25 * report.target_rate;  // the target inside the plot, not on its edge
    if (top <= 0) {
      for (const ConfigResult& c : report.configs) top = std::max(top, 4 * c.capacity.max_rate);
    }
    for (int k = 1; k <= 20 && top > 0; ++k) report.rate_grid.push_back(top * k / 20);
  }
  if (setup->reproduce) {
    report.reproduction =
        CompareWithPublished(report.model, report.configs[0].run, report.configs[1].run, setup->prompt_tokens);
  }

  if (!setup->out_dir.empty()) {
    std::vector<std::string> written;
    if (absl::Status s = WritePlotFiles(report, setup->out_dir, &written); !s.ok()) return Fail(s);
    if (!quiet) {
      for (const std::string& w : written) std::fprintf(stderr, "wrote %s\n", w.c_str());
    }
  }
  const nlohmann::json j = ToJson(report);
  if (setup->json_path == "-") {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << FormatTable(report);
    if (!setup->json_path.empty()) {
      std::ofstream f(setup->json_path);
      if (!f || !(f << j.dump(2) << "\n")) {
        return Fail(absl::InvalidArgumentError(absl::StrCat("--json: cannot write ", setup->json_path)));
      }
      if (!quiet) std::fprintf(stderr, "wrote %s\n", setup->json_path.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace beacon::planner

int main(int argc, char** argv) { return beacon::RunMain("beacon-plan", &beacon::planner::Main, argc, argv); }
