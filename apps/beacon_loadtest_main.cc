// beacon-loadtest: load testing beacon-serve over gRPC, or any OpenAI-compatible
// server over HTTP (--backend openai|openai-chat), for SLA tuning.
//
//   beacon-loadtest --concurrency 8 --requests 200 --prompt-len fixed:128 --output-len fixed:512 --ignore-eos
//   beacon-loadtest --rate 4 --duration-s 60 --kv-mix full:1,beacon@256:1 --json run.json --csv run.csv
//   beacon-loadtest sweep --concurrency 1:32:x2 --slo ttft_ms=1000,tpot_ms=60 --plot sweep.png
//   beacon-loadtest plot --from full.json,beacon.json --plot compare.png
//
// See docs/loadtest.md. Exit status: 0 done, 2 bad arguments, 1 server
// unreachable or no request succeeded, 130 interrupted (SIGINT/SIGTERM: what
// ran is still reported and written).
#include <csignal>
#include <cstdio>
#include <fstream>

#include "cli/loadtest/flags.h"
#include "loadtest/client.h"
#include "loadtest/report.h"
#include "loadtest/runner.h"
#include "loadtest/stats.h"
#include "loadtest/sweep.h"
#include "loadtest/vllm_result.h"
#include "loadtest/workload.h"
#include "util/run_main.h"

namespace beacon::loadtest {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "beacon-loadtest: %s\n", std::string(s.message()).c_str());
  const bool usage = s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound;
  if (usage) std::fprintf(stderr, "(beacon-loadtest --help lists the options)\n");
  return usage ? 2 : 1;
}

absl::Status WriteOutputs(const Config& c, const nlohmann::json& json, const std::string& csv) {
  if (!c.json_path.empty()) {
    if (absl::Status s = WriteTextFile(c.json_path, json.dump(2) + "\n"); !s.ok()) return s;
  }
  if (!c.csv_path.empty()) {
    if (absl::Status s = WriteTextFile(c.csv_path, csv); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// `beacon-loadtest plot`: re-plots saved sweep JSON files; needs no server.
int Plot(const Config& config) {
  std::vector<std::pair<std::string, SweepResult>> sweeps;
  for (size_t i = 0; i < config.plot_from.size(); ++i) {
    const std::string& path = config.plot_from[i];
    std::ifstream in(path);
    if (!in) return Fail(absl::NotFoundError(absl::StrCat("--from: cannot read ", path)));
    nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Fail(absl::InvalidArgumentError(absl::StrCat("--from: ", path, " is not JSON")));
    absl::StatusOr<SweepResult> r = SweepFromJson(doc);
    if (!r.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--from: ", path, ": ", r.status().message())));
    sweeps.emplace_back(config.plot_names.empty() ? SweepName(doc) : config.plot_names[i], *std::move(r));
  }
  const absl::Status s = sweeps.size() == 1 ? WriteSweepPlot(sweeps[0].second, config.plot_path)
                                            : WriteComparisonPlot(sweeps, config.plot_path);
  if (!s.ok()) return Fail(s);
  std::fprintf(stderr, "beacon-loadtest: wrote %s\n", config.plot_path.c_str());
  return 0;
}

int Main(int argc, char** argv) {
  absl::StatusOr<Config> parsed = ParseConfig(argc, argv);
  if (!parsed.ok()) return Fail(parsed.status());
  Config config = *std::move(parsed);
  if (config.help) {
    std::printf("%s", UsageText().c_str());
    return 0;
  }
  if (config.plot_only) return Plot(config);
  absl::StatusOr<std::unique_ptr<StreamClient>> client = ConnectClient(config.client);
  if (!client.ok()) return Fail(client.status());
  const v1::ModelInfo& info = (*client)->model_info();
  if (absl::Status s = ApplyModelInfo(info, &config); !s.ok()) return Fail(s);
  if (absl::Status s = ApplyReferenceLengths(client->get(), &config); !s.ok()) return Fail(s);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  config.load.stop = &g_stop;
  std::fprintf(stderr, "beacon-loadtest: %s against %s (%s)\n", DescribeRun(config).c_str(),
               config.client.server.c_str(), info.model().c_str());

  if (config.sweep) {
    SweepResult r = RunSweep(client->get(), config, &g_stop, [&](const SweepLevel& l) {
      std::fprintf(stderr, "%s\n", SweepLevelLine(config.by_concurrency, l).c_str());
    });
    std::printf("%s", SweepTable(r).c_str());
    if (absl::Status s = WriteOutputs(config, SweepJson(config, info, r), SweepCsv(r)); !s.ok()) return Fail(s);
    if (!config.plot_path.empty()) {
      if (absl::Status s = WriteSweepPlot(r, config.plot_path); !s.ok()) return Fail(s);
    }
    return !r.levels.empty() && r.levels.back().interrupted ? 130 : 0;
  }

  Workload workload(config.workload);
  RunOutput out = RunLoad(client->get(), &workload, config.load);
  RunSummary summary = Summarize(out.results, config.slo);
  std::printf("%s", RunTable(summary, absl::StrCat("beacon-loadtest: ", DescribeRun(config),
                                                   out.interrupted ? " (interrupted)" : ""))
                        .c_str());
  const nlohmann::json json = config.json_format == "vllm" ? VllmResultJson(config, info, summary, out.results)
                                                           : RunJson(config, info, summary, out.results);
  if (absl::Status s = WriteOutputs(config, json, RequestsCsv(out.results)); !s.ok()) {
    return Fail(s);
  }
  if (out.interrupted) return 130;  // like a shell: killed by SIGINT, after reporting what ran
  if (summary.requests > 0 && summary.succeeded == 0) {
    std::fprintf(stderr, "beacon-loadtest: no request succeeded (errors: %zu kinds; see the table)\n",
                 summary.errors.size());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace beacon::loadtest

int main(int argc, char** argv) { return beacon::RunMain("beacon-loadtest", &beacon::loadtest::Main, argc, argv); }
