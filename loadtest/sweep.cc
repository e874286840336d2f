#include "loadtest/sweep.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loadtest/runner.h"
#include "loadtest/workload.h"
#include "plot/png_plot.h"

namespace beacon::loadtest {

bool LevelPasses(const RunSummary& s, double target) { return s.requests > 0 && s.attainment >= target - 1e-12; }

void JudgeSweep(SweepResult* r) {
  r->best.reset();
  r->bounded = false;
  for (const SweepLevel& l : r->levels) {
    if (!l.pass) {
      r->bounded = true;
      break;
    }
    r->best = l.level;
  }
}

std::string LevelName(bool by_concurrency, double level) {
  return by_concurrency ? absl::StrCat("concurrency ", level) : absl::StrCat("rate ", level, "/s");
}

SweepResult RunSweep(StreamClient* client, const Config& config, const std::atomic<bool>* stop,
                     const std::function<void(const SweepLevel&)>& on_level) {
  SweepResult result;
  result.by_concurrency = config.by_concurrency;
  result.slo = config.slo;
  result.attainment_target = config.slo_attainment;
  int32_t fails_in_a_row = 0;
  for (double level : config.levels) {
    Workload workload(config.workload);
    LoadOptions load = config.load;
    load.rate = config.by_concurrency ? 0 : level;
    load.concurrency = config.by_concurrency ? static_cast<int32_t>(level) : 0;
    if (config.waves > 0) load.requests = static_cast<int64_t>(config.waves) * load.concurrency;
    load.label = LevelName(config.by_concurrency, level);
    load.stop = stop;
    RunOutput out = RunLoad(client, &workload, load);
    SweepLevel l;
    l.level = level;
    l.summary = Summarize(out.results, config.slo);
    l.interrupted = out.interrupted;
    l.pass = !out.interrupted && LevelPasses(l.summary, config.slo_attainment);
    result.levels.push_back(l);
    if (on_level) on_level(result.levels.back());
    if (out.interrupted) break;
    fails_in_a_row = l.pass ? 0 : fails_in_a_row + 1;
    if (fails_in_a_row >= config.stop_after_fails) break;
  }
  JudgeSweep(&result);
  return result;
}

absl::Status WriteSweepPlot(const SweepResult& r, const std::string& path) {
  using Points = std::vector<std::pair<double, double>>;
  auto series = [&](auto field) {
    Points p;
    for (const SweepLevel& l : r.levels) p.emplace_back(l.level, field(l.summary));
    return p;
  };
  const std::string x_label = r.by_concurrency ? "concurrency (requests in flight)" : "offered load (requests/s)";
  const bool log_x =
      r.levels.size() >= 3 && r.levels.front().level > 0 && r.levels.back().level / r.levels.front().level >= 8;
  auto base = [&](std::string title, std::string y_label, bool log_y) {
    plot::LinePlot p;
    p.title = std::move(title);
    p.x_label = x_label;
    p.y_label = std::move(y_label);
    p.log_x = log_x;
    p.log_y = log_y;
    for (const SweepLevel& l : r.levels) p.x_ticks.push_back(l.level);
    if (r.best) p.AddVLine(*r.best, absl::StrCat("best ", plot::FormatTick(*r.best)), {0, 128, 0});
    return p;
  };

  plot::LinePlot ttft = base("TTFT and end-to-end latency", "ms", true);
  ttft.AddSeries("TTFT p50", series([](const RunSummary& s) { return s.ttft_ms.median; }));
  ttft.AddSeries("TTFT p90", series([](const RunSummary& s) { return s.ttft_ms.p90; }));
  ttft.AddSeries("TTFT p99", series([](const RunSummary& s) { return s.ttft_ms.p99; }));
  ttft.AddSeries("E2E p50", series([](const RunSummary& s) { return s.e2e_ms.median; })).dashed = true;
  ttft.AddSeries("E2E p99", series([](const RunSummary& s) { return s.e2e_ms.p99; })).dashed = true;
  if (r.slo.ttft_ms) ttft.AddHLine(*r.slo.ttft_ms, "TTFT SLO", {214, 39, 40});
  if (r.slo.e2e_ms) ttft.AddHLine(*r.slo.e2e_ms, "E2E SLO", {140, 86, 75});

  plot::LinePlot tpot = base("Time per output token", "ms", true);
  tpot.AddSeries("TPOT p50", series([](const RunSummary& s) { return s.tpot_ms.median; }));
  tpot.AddSeries("TPOT p90", series([](const RunSummary& s) { return s.tpot_ms.p90; }));
  tpot.AddSeries("TPOT p99", series([](const RunSummary& s) { return s.tpot_ms.p99; }));
  tpot.AddSeries("ITL p99", series([](const RunSummary& s) { return s.itl_ms.p99; })).dashed = true;
  if (r.slo.tpot_ms) tpot.AddHLine(*r.slo.tpot_ms, "TPOT SLO", {214, 39, 40});

  plot::LinePlot thr =
      base(absl::StrFormat("Throughput and goodput (SLO met by >= %.0f%% of requests)", r.attainment_target * 100),
           "requests/s", false);
  thr.y_from_zero = true;
  thr.AddSeries("completed", series([](const RunSummary& s) { return s.request_throughput; }));
  thr.AddSeries("goodput", series([](const RunSummary& s) { return s.goodput; }));
  return plot::WritePngStack(path, {ttft, tpot, thr}, 900, 380);
}

absl::Status WriteComparisonPlot(const std::vector<std::pair<std::string, SweepResult>>& sweeps,
                                 const std::string& path) {
  if (sweeps.empty()) return absl::InvalidArgumentError("no sweep to plot");
  const bool by_concurrency = sweeps.front().second.by_concurrency;
  std::vector<double> levels;
  for (const auto& [name, r] : sweeps) {
    if (r.by_concurrency != by_concurrency) {
      return absl::InvalidArgumentError("cannot compare a rate sweep with a concurrency sweep");
    }
    for (const SweepLevel& l : r.levels) levels.push_back(l.level);
  }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  const SweepResult& first = sweeps.front().second;
  auto panel = [&](std::string title, std::string y_label, bool log_y, auto field) {
    plot::LinePlot p;
    p.title = std::move(title);
    p.x_label = by_concurrency ? "concurrency (requests in flight)" : "offered load (requests/s)";
    p.y_label = std::move(y_label);
    p.log_y = log_y;
    p.y_from_zero = !log_y;
    p.x_ticks = levels;
    const size_t n = sizeof(plot::kPalette) / sizeof(plot::kPalette[0]);
    for (size_t i = 0; i < sweeps.size(); ++i) {
      const auto& [name, r] = sweeps[i];
      std::vector<std::pair<double, double>> pts;
      for (const SweepLevel& l : r.levels) pts.emplace_back(l.level, field(l.summary));
      p.AddSeries(name, std::move(pts));
      if (r.best) p.AddVLine(*r.best, absl::StrCat(name, " best ", plot::FormatTick(*r.best)), plot::kPalette[i % n]);
    }
    return p;
  };
  plot::LinePlot ttft = panel("TTFT p90", "ms", true, [](const RunSummary& s) { return s.ttft_ms.p90; });
  if (first.slo.ttft_ms) ttft.AddHLine(*first.slo.ttft_ms, "TTFT SLO", {90, 90, 90});
  plot::LinePlot tpot = panel("TPOT p90", "ms", true, [](const RunSummary& s) { return s.tpot_ms.p90; });
  if (first.slo.tpot_ms) tpot.AddHLine(*first.slo.tpot_ms, "TPOT SLO", {90, 90, 90});
  plot::LinePlot good =
      panel("Goodput (requests/s meeting the SLO)", "requests/s", false, [](const RunSummary& s) { return s.goodput; });
  return plot::WritePngStack(path, {ttft, tpot, good}, 900, 360);
}

}  // namespace beacon::loadtest
