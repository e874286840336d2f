#include "planner/plots.h"

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "planner/report.h"
#include "plot/png_plot.h"

namespace beacon::planner {

absl::Status WritePngPlots(const PlanReport& r, const std::string& dir, std::vector<std::string>* written) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  plot::LinePlot tput, mem;
  tput.title = absl::StrCat("Output tokens/s against KV budget (", r.model.name, ", ", r.gpu.name, ")");
  tput.x_label = "KV budget (slots per KV head)";
  tput.y_label = "output tokens/s";
  mem.title = "Peak memory (weights + KV) against KV budget";
  mem.x_label = tput.x_label;
  mem.y_label = "GiB";
  tput.log_x = mem.log_x = true;
  std::map<std::string, std::vector<std::pair<double, double>>> by_policy_tput, by_policy_mem;
  for (const ConfigResult& c : r.configs) {
    if (!c.kv.compresses()) {
      tput.AddHLine(c.run.output_tokens_per_s, absl::StrCat(std::string(c.kv.policy_name()), " cache"));
      mem.AddHLine(c.run.peak_total_bytes / kGiB, absl::StrCat(std::string(c.kv.policy_name()), " cache"));
      continue;
    }
    by_policy_tput[std::string(c.kv.policy_name())].push_back({c.kv.budget, c.run.output_tokens_per_s});
    by_policy_mem[std::string(c.kv.policy_name())].push_back({c.kv.budget, c.run.peak_total_bytes / kGiB});
  }
  for (auto& [policy, pts] : by_policy_tput) tput.AddSeries(policy, pts);
  for (auto& [policy, pts] : by_policy_mem) mem.AddSeries(policy, pts);
  mem.AddHLine(r.gpu.memory_bytes / kGiB, "GPU memory");
  const std::string sweep = (std::filesystem::path(dir) / "budget_sweep.png").string();
  if (absl::Status s = plot::WritePngStack(sweep, {tput, mem}, 900, 420); !s.ok()) return s;
  written->push_back(sweep);

  bool any_capacity = false;
  for (const ConfigResult& c : r.configs) any_capacity |= c.has_capacity;
  if (!any_capacity || r.rate_grid.empty()) return absl::OkStatus();
  plot::LinePlot rep;
  rep.title = "Replicas needed against request rate";
  rep.x_label = absl::StrCat("requests/s over all replicas (SLO ", r.slo.Describe(), ")");
  rep.y_label = "replicas";
  for (const ConfigResult& c : r.configs) {
    if (!c.has_capacity || c.capacity.max_rate <= 0) continue;
    std::vector<std::pair<double, double>> pts;
    for (double rate : r.rate_grid) pts.push_back({rate, static_cast<double>(ReplicasFor(rate, c.capacity.max_rate))});
    rep.AddSeries(c.label, pts);
  }
  if (r.target_rate > 0) rep.AddVLine(r.target_rate, "target");
  const std::string path = (std::filesystem::path(dir) / "replicas_vs_rate.png").string();
  if (absl::Status s = rep.WritePng(path, 900, 480); !s.ok()) return s;
  written->push_back(path);
  return absl::OkStatus();
}

}  // namespace beacon::planner
