#include "loadtest/report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/csv.h"

namespace beacon::loadtest {
namespace {

std::string MixLabel(const std::vector<KvChoice>& mix) {
  std::vector<std::string> parts;
  parts.reserve(mix.size());
  for (const KvChoice& k : mix) {
    parts.push_back(mix.size() > 1 && k.weight != 1 ? absl::StrCat(k.Label(), ":", k.weight) : k.Label());
  }
  return absl::StrJoin(parts, ",");
}

std::string ErrorsLine(const RunSummary& s) {
  if (s.errors.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& [k, v] : s.errors) parts.push_back(absl::StrCat(k, " ", v));
  return absl::StrJoin(parts, ", ");
}

nlohmann::json Json(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
}

}  // namespace

std::string DescribeRun(const Config& c) {
  std::string s;
  if (c.sweep) {
    s = c.by_concurrency ? "closed loop" : "open loop";
  } else if (c.load.concurrency > 0) {
    s = absl::StrCat("closed loop, concurrency ", c.load.concurrency);
  } else {
    s = absl::StrCat(
        "open loop, ", c.load.rate, " req/s",
        c.load.burstiness != 1 ? absl::StrCat(" (gamma, burstiness ", c.load.burstiness, ")") : " (Poisson)");
  }
  absl::StrAppend(&s, ", ",
                  c.waves > 0           ? absl::StrCat(c.waves, " x concurrency requests per level")
                  : c.load.requests > 0 ? absl::StrCat(c.load.requests, " requests")
                                        : absl::StrCat(c.load.duration_s, " s"));
  if (c.load.warmup > 0) absl::StrAppend(&s, " (+", c.load.warmup, " warm-up)");
  if (c.workload.prompts.empty()) {
    absl::StrAppend(&s, ", prompt ", c.workload.prompt_len.ToString());
  } else {
    absl::StrAppend(&s, ", ", c.workload.prompts.size(), " prompts from ", c.dataset.empty() ? "file" : c.dataset,
                    c.reference_output_len ? " (reference output lengths)" : "");
  }
  absl::StrAppend(&s, ", output ", c.workload.output_len.ToString(), c.workload.ignore_eos ? ", ignore_eos" : "",
                  ", kv ", MixLabel(c.workload.kv_mix));
  return s;
}

std::string RunTable(const RunSummary& s, const std::string& heading) {
  std::string t = absl::StrCat("==== ", heading, " ====\n");
  auto row = [&](const char* k, const std::string& v) { absl::StrAppend(&t, absl::StrFormat("%-20s%s\n", k, v)); };
  row("requests", absl::StrFormat("%d measured: %d ok, %d failed (%d warm-up)", s.requests, s.succeeded, s.failed,
                                  s.all_requests - s.requests));
  row("duration", absl::StrFormat("%.2f s", s.duration_s));
  row("request throughput", absl::StrFormat("%.3f req/s", s.request_throughput));
  row("output throughput", absl::StrFormat("%.1f tok/s (%d tokens)", s.output_throughput, s.output_tokens));
  row("total throughput", absl::StrFormat("%.1f tok/s (%d prompt + %d output)", s.total_token_throughput,
                                          s.prompt_tokens, s.output_tokens));
  if (!s.slo.empty()) {
    row("goodput", absl::StrFormat("%.3f req/s: %d/%d requests (%.1f%%) meet %s", s.goodput, s.good, s.requests,
                                   s.attainment * 100, s.slo.ToString()));
  }
  row("errors", ErrorsLine(s));
  std::vector<std::string> fr;
  for (const auto& [k, v] : s.finish_reasons) fr.push_back(absl::StrCat(k, " ", v));
  row("finish reasons", fr.empty() ? "none" : absl::StrJoin(fr, ", "));
  absl::StrAppend(&t, absl::StrFormat("\n%-14s%10s%10s%10s%10s%10s%9s\n", "latency (ms)", "mean", "median", "p90",
                                      "p99", "max", "count"));
  for (const auto& [name, m] : {std::pair<const char*, const Summary*>{"TTFT", &s.ttft_ms},
                                {"TPOT", &s.tpot_ms},
                                {"ITL", &s.itl_ms},
                                {"E2E", &s.e2e_ms}}) {
    absl::StrAppend(&t, absl::StrFormat("%-14s%10.2f%10.2f%10.2f%10.2f%10.2f%9d\n", name, m->mean, m->median, m->p90,
                                        m->p99, m->max, m->count));
  }
  return t;
}

nlohmann::json SloJson(const Slo& s) {
  nlohmann::json slo = nlohmann::json::object();
  if (s.ttft_ms) slo["ttft_ms"] = *s.ttft_ms;
  if (s.tpot_ms) slo["tpot_ms"] = *s.tpot_ms;
  if (s.e2e_ms) slo["e2e_ms"] = *s.e2e_ms;
  return slo;
}

nlohmann::json SummaryJson(const RunSummary& s) {
  return {
      {"requests", s.requests},
      {"succeeded", s.succeeded},
      {"failed", s.failed},
      {"errors", s.errors},
      {"finish_reasons", s.finish_reasons},
      {"duration_s", s.duration_s},
      {"prompt_tokens", s.prompt_tokens},
      {"output_tokens", s.output_tokens},
      {"request_throughput", s.request_throughput},
      {"output_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"ttft_ms", Json(s.ttft_ms)},
      {"tpot_ms", Json(s.tpot_ms)},
      {"itl_ms", Json(s.itl_ms)},
      {"e2e_ms", Json(s.e2e_ms)},
      {"slo", SloJson(s.slo)},
      {"good", s.good},
      {"goodput", s.goodput},
      {"attainment", s.attainment},
      {"all",
       {{"requests", s.all_requests}, {"prompt_tokens", s.all_prompt_tokens}, {"output_tokens", s.all_output_tokens}}}};
}

nlohmann::json ConfigJson(const Config& c, const v1::ModelInfo& info) {
  nlohmann::json mix = nlohmann::json::array();
  for (const KvChoice& k : c.workload.kv_mix) {
    mix.push_back({{"policy", k.policy}, {"budget", k.budget}, {"weight", k.weight}});
  }
  return {{"command_line", c.command_line},
          {"label", c.label},
          {"description", DescribeRun(c)},
          {"server", c.client.server},
          {"backend", std::string(BackendName(c.client.backend))},
          {"dataset", c.dataset},
          {"model", info.model()},
          {"server_default_kv_policy", info.default_kv_policy()},
          {"kv_pool_tokens", info.kv_pool_tokens()},
          {"mode", c.sweep ? "sweep" : "run"},
          {"loop", (c.sweep ? c.by_concurrency : c.load.concurrency > 0) ? "closed" : "open"},
          {"rate", c.load.rate},
          {"burstiness", c.load.burstiness},
          {"concurrency", c.load.concurrency},
          {"levels", c.levels},
          {"requests", c.waves > 0 ? 0 : c.load.requests},
          {"waves", c.waves},
          {"duration_s", c.load.duration_s},
          {"warmup", c.load.warmup},
          {"seed", c.load.seed},
          {"prompt_len", c.workload.prompts.empty() ? c.workload.prompt_len.ToString() : "file"},
          {"output_len", c.workload.output_len.ToString()},
          {"prompts_file_entries", c.workload.prompts.size()},
          {"ignore_eos", c.workload.ignore_eos},
          {"temperature", c.workload.temperature},
          {"kv_mix", mix},
          {"connections", c.client.connections}};
}

nlohmann::json RunJson(const Config& c, const v1::ModelInfo& info, const RunSummary& s,
                       const std::vector<RequestResult>& results) {
  nlohmann::json reqs = nlohmann::json::array();
  for (const RequestResult& r : results) {
    nlohmann::json j = {{"index", r.index},
                        {"warmup", r.warmup},
                        {"kv", r.kv},
                        {"start_s", r.start_s},
                        {"ttft_ms", r.ttft_s >= 0 ? nlohmann::json(r.ttft_s * 1e3) : nlohmann::json()},
                        {"tpot_ms", r.output_tokens > 1 ? nlohmann::json(r.TpotS() * 1e3) : nlohmann::json()},
                        {"e2e_ms", r.e2e_s * 1e3},
                        {"prompt_tokens", r.prompt_tokens},
                        {"output_tokens", r.output_tokens},
                        {"max_tokens", r.max_tokens},
                        {"status", GrpcCodeName(r.grpc_code)},
                        {"finish_reason", r.finish_reason},
                        {"ok", r.Ok()},
                        {"meets_slo", MeetsSlo(r, s.slo)}};
    if (!r.error.empty()) j["error"] = r.error;
    reqs.push_back(std::move(j));
  }
  return {{"config", ConfigJson(c, info)}, {"summary", SummaryJson(s)}, {"requests", reqs}};
}

std::string RequestsCsv(const std::vector<RequestResult>& results) {
  std::string out =
      "index,warmup,kv,start_s,ttft_ms,tpot_ms,e2e_ms,itl_mean_ms,itl_max_ms,prompt_tokens,output_tokens,max_tokens,"
      "status,finish_reason,error\n";
  for (const RequestResult& r : results) {
    const Summary itl = Summary::Of(r.itl_s);
    absl::StrAppend(
        &out,
        absl::StrFormat("%d,%d,%s,%.6f,%s,%s,%.3f,%.3f,%.3f,%d,%d,%d,%s,%s,%s\n", r.index, r.warmup ? 1 : 0,
                        cli::CsvField(r.kv), r.start_s, r.ttft_s >= 0 ? absl::StrFormat("%.3f", r.ttft_s * 1e3) : "",
                        r.output_tokens > 1 ? absl::StrFormat("%.3f", r.TpotS() * 1e3) : "", r.e2e_s * 1e3,
                        itl.mean * 1e3, itl.max * 1e3, r.prompt_tokens, r.output_tokens, r.max_tokens,
                        GrpcCodeName(r.grpc_code), r.finish_reason, cli::CsvField(r.error)));
  }
  return out;
}

std::string SweepLevelLine(bool by_concurrency, const SweepLevel& l) {
  const RunSummary& s = l.summary;
  return absl::StrFormat("%-18s %s  good %3.0f%%  %.3f req/s  goodput %.3f  TTFT p90 %.1f ms  TPOT p90 %.2f ms%s",
                         LevelName(by_concurrency, l.level), l.pass ? "PASS" : "FAIL", s.attainment * 100,
                         s.request_throughput, s.goodput, s.ttft_ms.p90, s.tpot_ms.p90,
                         s.errors.empty() ? "" : absl::StrCat("  errors: ", ErrorsLine(s)));
}

std::string SweepTable(const SweepResult& r) {
  std::string t = absl::StrFormat("==== sweep: SLO %s, a level passes when >= %.0f%% of requests meet it ====\n",
                                  r.slo.ToString(), r.attainment_target * 100);
  absl::StrAppend(&t, absl::StrFormat("%8s %5s %6s %8s %8s %9s %9s %9s %9s %8s %8s %8s %9s %9s %7s\n",
                                      r.by_concurrency ? "conc" : "rate", "pass", "good%", "req/s", "goodput",
                                      "out tok/s", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p90",
                                      "TPOT p99", "E2E p50", "E2E p99", "errors"));
  for (const SweepLevel& l : r.levels) {
    const RunSummary& s = l.summary;
    int64_t errors = 0;
    for (const auto& [k, v] : s.errors) errors += v;
    absl::StrAppend(
        &t, absl::StrFormat("%8g %5s %6.1f %8.3f %8.3f %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f %8.2f %9.1f "
                            "%9.1f %7d\n",
                            l.level, l.pass ? "yes" : "no", s.attainment * 100, s.request_throughput, s.goodput,
                            s.output_throughput, s.ttft_ms.median, s.ttft_ms.p90, s.ttft_ms.p99, s.tpot_ms.median,
                            s.tpot_ms.p90, s.tpot_ms.p99, s.e2e_ms.median, s.e2e_ms.p99, errors));
  }
  absl::StrAppend(&t, "(latencies in ms)\n");
  if (!r.best) {
    absl::StrAppend(&t, "no level met the SLO: lower the load levels or relax the SLO\n");
  } else if (r.bounded) {
    absl::StrAppend(&t, "highest level meeting the SLO: ", LevelName(r.by_concurrency, *r.best), "\n");
  } else {
    absl::StrAppend(&t, "every level met the SLO (best ", LevelName(r.by_concurrency, *r.best),
                    "): raise the levels to find the knee\n");
  }
  return t;
}

nlohmann::json SweepJson(const Config& c, const v1::ModelInfo& info, const SweepResult& r) {
  nlohmann::json levels = nlohmann::json::array();
  for (const SweepLevel& l : r.levels) {
    levels.push_back(
        {{"level", l.level}, {"pass", l.pass}, {"interrupted", l.interrupted}, {"summary", SummaryJson(l.summary)}});
  }
  return {{"config", ConfigJson(c, info)},
          {"slo", SloJson(r.slo)},
          {"slo_attainment", r.attainment_target},
          {"by", r.by_concurrency ? "concurrency" : "rate"},
          {"levels", levels},
          {"best", r.best ? nlohmann::json(*r.best) : nlohmann::json()},
          {"bounded", r.bounded}};
}

std::string SweepCsv(const SweepResult& r) {
  std::string out =
      "level,pass,requests,succeeded,good,attainment,request_throughput,goodput,output_throughput,"
      "ttft_mean_ms,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,tpot_mean_ms,tpot_p50_ms,tpot_p90_ms,tpot_p99_ms,"
      "itl_p50_ms,itl_p99_ms,e2e_p50_ms,e2e_p90_ms,e2e_p99_ms\n";
  for (const SweepLevel& l : r.levels) {
    const RunSummary& s = l.summary;
    absl::StrAppend(&out, absl::StrFormat("%g,%d,%d,%d,%d,%.4f,%.4f,%.4f,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
                                          "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                                          l.level, l.pass ? 1 : 0, s.requests, s.succeeded, s.good, s.attainment,
                                          s.request_throughput, s.goodput, s.output_throughput, s.ttft_ms.mean,
                                          s.ttft_ms.median, s.ttft_ms.p90, s.ttft_ms.p99, s.tpot_ms.mean,
                                          s.tpot_ms.median, s.tpot_ms.p90, s.tpot_ms.p99, s.itl_ms.median, s.itl_ms.p99,
                                          s.e2e_ms.median, s.e2e_ms.p90, s.e2e_ms.p99));
  }
  return out;
}

namespace {

Summary SummaryFrom(const nlohmann::json& j) {
  Summary s;
  s.count = j.at("count").get<int64_t>();
  s.mean = j.at("mean").get<double>();
  s.median = j.at("median").get<double>();
  s.p90 = j.at("p90").get<double>();
  s.p99 = j.at("p99").get<double>();
  s.max = j.at("max").get<double>();
  return s;
}

}  // namespace

absl::StatusOr<SweepResult> SweepFromJson(const nlohmann::json& doc) {
  try {
    SweepResult r;
    r.by_concurrency = doc.at("by").get<std::string>() == "concurrency";
    r.attainment_target = doc.at("slo_attainment").get<double>();
    const nlohmann::json& slo = doc.at("slo");
    if (slo.contains("ttft_ms")) r.slo.ttft_ms = slo["ttft_ms"].get<double>();
    if (slo.contains("tpot_ms")) r.slo.tpot_ms = slo["tpot_ms"].get<double>();
    if (slo.contains("e2e_ms")) r.slo.e2e_ms = slo["e2e_ms"].get<double>();
    for (const nlohmann::json& l : doc.at("levels")) {
      SweepLevel level;
      level.level = l.at("level").get<double>();
      level.pass = l.at("pass").get<bool>();
      const nlohmann::json& s = l.at("summary");
      level.summary.slo = r.slo;
      level.summary.requests = s.at("requests").get<int64_t>();
      level.summary.succeeded = s.at("succeeded").get<int64_t>();
      level.summary.good = s.at("good").get<int64_t>();
      level.summary.attainment = s.at("attainment").get<double>();
      level.summary.request_throughput = s.at("request_throughput").get<double>();
      level.summary.output_throughput = s.at("output_throughput").get<double>();
      level.summary.goodput = s.at("goodput").get<double>();
      level.summary.ttft_ms = SummaryFrom(s.at("ttft_ms"));
      level.summary.tpot_ms = SummaryFrom(s.at("tpot_ms"));
      level.summary.itl_ms = SummaryFrom(s.at("itl_ms"));
      level.summary.e2e_ms = SummaryFrom(s.at("e2e_ms"));
      r.levels.push_back(std::move(level));
    }
    JudgeSweep(&r);
    return r;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a beacon-loadtest sweep JSON: ", e.what()));
  }
}

std::string SweepName(const nlohmann::json& doc) {
  const nlohmann::json cfg = doc.value("config", nlohmann::json::object());
  if (!cfg.value("label", "").empty()) return cfg["label"].get<std::string>();
  std::vector<KvChoice> mix;
  for (const nlohmann::json& k : cfg.value("kv_mix", nlohmann::json::array())) {
    mix.push_back(KvChoice{k.value("policy", "default"), k.value("budget", 0), k.value("weight", 1)});
  }
  return mix.empty() ? "sweep" : MixLabel(mix);
}

absl::Status WriteTextFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write ", path));
  out << content;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

}  // namespace beacon::loadtest
