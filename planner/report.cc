#include "planner/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planner/plots.h"

namespace beacon::planner {
namespace {

using json = nlohmann::json;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Budget(const ConfigResult& c) { return c.kv.compresses() ? absl::StrCat(c.kv.budget) : "-"; }

json PercentilesJson(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}, {"n", p.n}};
}

std::string Replicas(int64_t n) { return n < 0 ? "unreachable" : absl::StrCat(n); }

}  // namespace

std::string FormatTable(const PlanReport& r) {
  std::string out;
  const std::vector<std::string> measured = r.gpu.MeasuredKeys();
  absl::StrAppendFormat(&out,
                        "model    %s: %d layers, %d/%d heads (q/kv), head_dim %d; weights %.2f GB; KV %.1f KiB/token\n",
                        r.model.name, r.model.n_layers, r.model.n_heads, r.model.n_kv_heads, r.model.head_dim,
                        r.model.weight_bytes() / 1e9, r.model.kv_bytes_per_token() / 1024);
  absl::StrAppendFormat(&out, "gpu      %s (%s): %.0f GB, %.2f TB/s, %.0f TFLOP/s bf16; %s\n", r.gpu.name, r.gpu.file,
                        r.gpu.memory_bytes / 1e9, r.gpu.hbm_bandwidth / 1e12, r.gpu.bf16_flops / 1e12,
                        measured.empty() ? "no measured constants: every figure below is modelled"
                                         : absl::StrCat("measured: ", absl::StrJoin(measured, ", ")));
  absl::StrAppendFormat(&out,
                        "pool     %.2f GiB of KV = %d blocks x %d slots; scheduler max_running %d, "
                        "max_step_tokens %d, prefill_chunk %d, admission %s\n",
                        r.pool.bytes / kGiB, r.pool.blocks, r.pool.block_size, r.sched.max_running,
                        r.sched.max_step_tokens, r.sched.prefill_chunk, AdmissionModeName(r.sched.admission));
  absl::StrAppendFormat(&out, "workload %s\n\n", r.workload.Describe());

  absl::StrAppendFormat(&out, "%-9s %6s %9s %13s %8s %9s %10s %15s %15s %6s %6s\n", "policy", "budget", "footprint",
                        "admitted", "peak KV", "peak mem", "out tok/s", "TTFT p50/p99", "TPOT p50/p99", "mem-bd",
                        "sim");
  absl::StrAppendFormat(&out, "%-9s %6s %9s %13s %8s %9s %10s %15s %15s %6s %6s\n", "", "", "slots/req", "arith / sim",
                        "GiB", "GiB", "", "s", "ms", "steps", "s");
  for (const ConfigResult& c : r.configs) {
    const RunResult& x = c.run;
    const double mem_bound =
        x.engine.steps > 0 ? 100.0 * (x.engine.steps - x.engine.compute_bound_steps) / x.engine.steps : 0;
    absl::StrAppendFormat(&out, "%-9s %6s %9d %6d / %-4d %8.2f %9.2f %10.1f %7.3f/%-7.3f %7.2f/%-7.2f %5.0f%% %6.1f\n",
                          std::string(c.kv.policy_name()), Budget(c), x.footprint_slots, x.admitted_by_footprint,
                          x.peak_running, x.peak_kv_bytes / kGiB, x.peak_total_bytes / kGiB, x.output_tokens_per_s,
                          x.ttft_s.p50, x.ttft_s.p99, x.tpot_s.p50 * 1e3, x.tpot_s.p99 * 1e3, mem_bound, x.wall_s);
  }
  for (const ConfigResult& c : r.configs) {
    const RunResult& x = c.run;
    if (x.reserved_policy_state_bytes > 0) {
      absl::StrAppendFormat(
          &out,
          "  %s: policy state outside the KV pool (GPU), reserved for max_running %d: %.2f GiB "
          "(%.1f MB a sequence and %.1f MB of eviction scratch; %.2f GiB of states at the peak of %d); %s\n",
          c.label, r.sched.max_running, x.reserved_policy_state_bytes / kGiB,
          (x.reserved_policy_state_bytes - x.evict_scratch_bytes) / std::max(1, r.sched.max_running) / 1e6,
          x.evict_scratch_bytes / 1e6, x.peak_policy_state_bytes / kGiB, x.peak_running,
          c.pool.policy_state_bytes > 0
              ? absl::StrFormat("taken out of the pool: %d blocks (%.2f GiB) left", c.pool.blocks, c.pool.bytes / kGiB)
              : std::string("on top of the given pool and of peak mem"));
    }
  }
  for (const ConfigResult& c : r.configs) {
    const RunResult& x = c.run;
    if (x.rejected > 0 || x.failed > 0 || x.preemptions > 0) {
      absl::StrAppendFormat(&out, "  %s: %d rejected (waiting queue full), %d failed, %d preemptions\n", c.label,
                            x.rejected, x.failed, x.preemptions);
    }
  }
  bool any_capacity = false;
  for (const ConfigResult& c : r.configs) any_capacity |= c.has_capacity;
  if (any_capacity) {
    absl::StrAppendFormat(&out, "\nSLO %s; Poisson arrivals, one replica per GPU\n", r.slo.Describe());
    absl::StrAppendFormat(&out, "%-9s %6s %12s %14s %12s  %s\n", "policy", "budget", "saturation", "max rate @SLO",
                          r.target_rate > 0 ? absl::StrFormat("replicas@%g", r.target_rate) : "replicas",
                          "limit above max rate");
    absl::StrAppendFormat(&out, "%-9s %6s %12s %14s %12s\n", "", "", "req/s", "req/s", "");
    for (const ConfigResult& c : r.configs) {
      if (!c.has_capacity) continue;
      absl::StrAppendFormat(&out, "%-9s %6s %12.4g %14.4g %12s  %s\n", std::string(c.kv.policy_name()), Budget(c),
                            c.capacity.saturation_rate, c.capacity.max_rate,
                            r.target_rate > 0 ? Replicas(c.replicas) : "-", c.capacity.limit);
    }
  }
  if (r.reproduction) {
    const Reproduction& p = *r.reproduction;
    absl::StrAppend(&out, "\nPublished efficiency table (Qwen3-4B, 32K outputs, batch 16, H200):\n");
    absl::StrAppendFormat(&out, "%-26s %12s %12s %8s\n", "", "full cache", "beacon 2K", "ratio");
    absl::StrAppendFormat(&out, "%-26s %12.1f %12.1f %7.1fx\n", "published peak, GB", p.published_full_gb,
                          p.published_beacon_gb, p.published_full_gb / p.published_beacon_gb);
    absl::StrAppendFormat(&out, "%-26s %12.1f %12.1f %7.1fx\n", "modelled peak, GiB", p.modelled_full_gib,
                          p.modelled_beacon_gib, p.memory_ratio());
    absl::StrAppendFormat(&out, "%-26s %+11.1f%% %+11.1f%%  %s\n", "modelled vs published", 100 * p.full_error,
                          100 * p.beacon_error, p.within_5pct ? "within 5%" : "NOT within 5%");
    absl::StrAppendFormat(&out, "%-26s %12.1f %12.1f\n", "  (same in GB: 1e9 B)", p.modelled_full_gb,
                          p.modelled_beacon_gb);
    absl::StrAppendFormat(&out, "%-26s %12.1f %12.1f\n", "  (KV alone, GB)", p.kv_only_full_gb, p.kv_only_beacon_gb);
    absl::StrAppendFormat(&out, "%-26s %12.1f %12.1f %7.1fx\n", "published tok/s", p.published_full_tps,
                          p.published_beacon_tps, p.published_beacon_tps / p.published_full_tps);
    absl::StrAppendFormat(&out, "%-26s %12.1f %12.1f %7.1fx\n", "modelled tok/s", p.modelled_full_tps,
                          p.modelled_beacon_tps, p.throughput_ratio());
    absl::StrAppend(&out, "assumptions:\n");
    for (const std::string& a : p.assumptions) absl::StrAppend(&out, "  - ", a, "\n");
  }
  return out;
}

json ToJson(const PlanReport& r) {
  json j;
  j["tool"] = "beacon-plan";
  j["model"] = {{"name", r.model.name},
                {"n_layers", r.model.n_layers},
                {"n_heads", r.model.n_heads},
                {"n_kv_heads", r.model.n_kv_heads},
                {"head_dim", r.model.head_dim},
                {"params", r.model.params_total},
                {"weight_bytes", r.model.weight_bytes()},
                {"kv_bytes_per_token", r.model.kv_bytes_per_token()},
                {"context_length", r.model.context_length}};
  json sources = json::object();
  for (const auto& [k, s] : r.gpu.sources) sources[k] = {{"kind", s.kind}, {"unit", s.unit}, {"source", s.source}};
  j["gpu"] = {{"name", r.gpu.name},
              {"file", r.gpu.file},
              {"memory_bytes", r.gpu.memory_bytes},
              {"hbm_bandwidth", r.gpu.hbm_bandwidth},
              {"bf16_flops", r.gpu.bf16_flops},
              {"measured", r.gpu.MeasuredKeys()},
              {"constants", sources}};
  j["pool"] = {{"kv_bytes", r.pool.bytes}, {"blocks", r.pool.blocks}, {"block_size", r.pool.block_size}};
  j["scheduler"] = {{"max_running", r.sched.max_running},
                    {"max_waiting", r.sched.max_waiting},
                    {"max_step_tokens", r.sched.max_step_tokens},
                    {"prefill_chunk", r.sched.prefill_chunk},
                    {"admission", std::string(AdmissionModeName(r.sched.admission))}};
  j["workload"] = {{"arrival", r.workload.arrival == ArrivalKind::kPoisson ? "poisson" : "closed_loop"},
                   {"rate", r.workload.rate},
                   {"concurrency", r.workload.concurrency},
                   {"requests", r.workload.num_requests},
                   {"prompt", r.workload.prompt.ToString()},
                   {"output", r.workload.output.ToString()},
                   {"max_tokens", r.workload.max_tokens},
                   {"seed", r.workload.seed},
                   {"shared_prefix", r.workload.shared_prefix},
                   {"share_ratio", r.workload.share_ratio},
                   {"prefix_cache", r.prefix_cache}};
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  j["slo"] = {{"ttft_ms", opt(r.slo.bounds.ttft_ms)},
              {"tpot_ms", opt(r.slo.bounds.tpot_ms)},
              {"e2e_ms", opt(r.slo.bounds.e2e_ms)},
              {"attainment", r.slo.attainment}};
  j["target_rate"] = r.target_rate;
  json configs = json::array();
  for (const ConfigResult& c : r.configs) {
    const RunResult& x = c.run;
    json e = {{"label", c.label},
              {"policy", std::string(c.kv.policy_name())},
              {"budget", c.kv.compresses() ? json(c.kv.budget) : json(nullptr)},
              {"interval", c.kv.interval},
              {"keep_prompt", c.kv.keep_prompt},
              {"footprint_slots", x.footprint_slots},
              {"admitted_by_footprint", x.admitted_by_footprint},
              {"admitted_concurrency", x.peak_running},
              {"mean_decode_batch", x.mean_decode_batch},
              {"peak_kv_bytes", x.peak_kv_bytes},
              {"peak_total_bytes", x.peak_total_bytes},
              {"peak_policy_state_bytes", x.peak_policy_state_bytes},
              {"reserved_policy_state_bytes", x.reserved_policy_state_bytes},
              {"evict_scratch_bytes", x.evict_scratch_bytes},
              {"pool_blocks", c.pool.blocks},
              {"completed", x.completed},
              {"rejected", x.rejected},
              {"failed", x.failed},
              {"preemptions", x.preemptions},
              {"output_tokens", x.output_tokens},
              {"makespan_s", x.makespan_s},
              {"output_tokens_per_s", x.output_tokens_per_s},
              {"requests_per_s", x.requests_per_s},
              {"ttft_s", PercentilesJson(x.ttft_s)},
              {"prefix_cache_queries", x.prefix_queries},
              {"prefix_cache_hits", x.prefix_hits},
              {"tpot_s", PercentilesJson(x.tpot_s)},
              {"e2e_s", PercentilesJson(x.e2e_s)},
              {"engine",
               {{"steps", x.engine.steps},
                {"decode_tokens", x.engine.decode_tokens},
                {"prefill_tokens", x.engine.prefill_tokens},
                {"evictions", x.engine.evictions},
                {"compute_bound_steps", x.engine.compute_bound_steps},
                {"busy_s", x.engine.busy_s},
                {"memory_s", x.engine.memory_s},
                {"compute_s", x.engine.compute_s},
                {"overhead_s", x.engine.overhead_s},
                {"evict_s", x.engine.evict_s},
                {"bytes", x.engine.bytes},
                {"flops", x.engine.flops},
                {"max_decode_batch", x.engine.max_decode_batch}}},
              {"simulation_wall_s", x.wall_s}};
    if (c.has_capacity) {
      e["capacity"] = {{"saturation_rate", c.capacity.saturation_rate},
                       {"max_rate", c.capacity.max_rate},
                       {"probes", c.capacity.probes},
                       {"limit", c.capacity.limit},
                       {"attainment_at_max", c.capacity.at_max.attainment},
                       {"replicas", r.target_rate > 0 ? json(c.replicas) : json(nullptr)}};
      json grid = json::array();
      for (double rate : r.rate_grid)
        grid.push_back({{"rate", rate}, {"replicas", ReplicasFor(rate, c.capacity.max_rate)}});
      e["capacity"]["replicas_vs_rate"] = grid;
    }
    configs.push_back(e);
  }
  j["configurations"] = configs;
  if (r.reproduction) {
    const Reproduction& p = *r.reproduction;
    j["reproduction"] = {{"published",
                          {{"full_gb", p.published_full_gb},
                           {"beacon_gb", p.published_beacon_gb},
                           {"full_tok_s", p.published_full_tps},
                           {"beacon_tok_s", p.published_beacon_tps}}},
                         {"modelled",
                          {{"full_gib", p.modelled_full_gib},
                           {"beacon_gib", p.modelled_beacon_gib},
                           {"full_gb", p.modelled_full_gb},
                           {"beacon_gb", p.modelled_beacon_gb},
                           {"kv_only_full_gb", p.kv_only_full_gb},
                           {"kv_only_beacon_gb", p.kv_only_beacon_gb},
                           {"full_tok_s", p.modelled_full_tps},
                           {"beacon_tok_s", p.modelled_beacon_tps}}},
                         {"full_error", p.full_error},
                         {"beacon_error", p.beacon_error},
                         {"memory_ratio", p.memory_ratio()},
                         {"throughput_ratio", p.throughput_ratio()},
                         {"within_5pct", p.within_5pct},
                         {"assumptions", p.assumptions}};
  }
  return j;
}

absl::Status WritePlotFiles(const PlanReport& r, const std::string& dir, std::vector<std::string>* written) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("out_dir: cannot create ", dir, ": ", ec.message()));
  auto open = [&](const std::string& name, std::ofstream* f) -> absl::Status {
    const std::string path = (std::filesystem::path(dir) / name).string();
    f->open(path);
    if (!*f) return absl::InvalidArgumentError(absl::StrCat("out_dir: cannot write ", path));
    written->push_back(path);
    return absl::OkStatus();
  };
  {
    std::ofstream f;
    if (absl::Status s = open("budget_sweep.csv", &f); !s.ok()) return s;
    f << "policy,budget,footprint_slots,admitted_concurrency,peak_kv_gib,peak_total_gib,output_tokens_per_s,"
         "ttft_p99_s,tpot_p99_s\n";
    for (const ConfigResult& c : r.configs) {
      const RunResult& x = c.run;
      f << absl::StrFormat("%s,%s,%d,%d,%.4f,%.4f,%.2f,%.5f,%.6f\n", std::string(c.kv.policy_name()),
                           c.kv.compresses() ? absl::StrCat(c.kv.budget) : "", x.footprint_slots, x.peak_running,
                           x.peak_kv_bytes / kGiB, x.peak_total_bytes / kGiB, x.output_tokens_per_s, x.ttft_s.p99,
                           x.tpot_s.p99);
    }
  }
  bool any_capacity = false;
  for (const ConfigResult& c : r.configs) any_capacity |= c.has_capacity;
  if (any_capacity && !r.rate_grid.empty()) {
    std::ofstream f;
    if (absl::Status s = open("replicas_vs_rate.csv", &f); !s.ok()) return s;
    f << "rate";
    for (const ConfigResult& c : r.configs) {
      if (c.has_capacity) f << "," << c.label;
    }
    f << "\n";
    for (double rate : r.rate_grid) {
      f << absl::StrFormat("%.6g", rate);
      for (const ConfigResult& c : r.configs) {
        if (c.has_capacity) f << "," << ReplicasFor(rate, c.capacity.max_rate);
      }
      f << "\n";
    }
  }
  return WritePngPlots(r, dir, written);
}

}  // namespace beacon::planner
