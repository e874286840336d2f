#include "loadtest/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace beacon::loadtest {

bool RequestResult::Ok() const {
  return grpc_code == 0 && (finish_reason == "stop" || finish_reason == "length" || finish_reason == "eos" ||
                            finish_reason == "stop_sequence");
}

double RequestResult::TpotS() const {
  return output_tokens > 1 && ttft_s >= 0 ? (e2e_s - ttft_s) / (output_tokens - 1) : 0.0;
}

std::string GrpcCodeName(int code) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

Summary Summary::Of(const std::vector<double>& values) {
  Summary s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  s.median = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  s.max = *std::max_element(values.begin(), values.end());
  return s;
}

bool MeetsSlo(const RequestResult& r, const Slo& slo) {
  if (!r.Ok()) return false;
  if (slo.ttft_ms && (r.ttft_s < 0 || r.ttft_s * 1e3 > *slo.ttft_ms)) return false;
  if (slo.tpot_ms && r.output_tokens > 1 && r.TpotS() * 1e3 > *slo.tpot_ms) return false;
  if (slo.e2e_ms && r.e2e_s * 1e3 > *slo.e2e_ms) return false;
  return true;
}

RunSummary Summarize(const std::vector<RequestResult>& results, const Slo& slo) {
  RunSummary s;
  s.slo = slo;
  std::vector<double> ttft, tpot, itl, e2e;
  double t_first = std::numeric_limits<double>::infinity(), t_last = -t_first;
  for (const RequestResult& r : results) {
    ++s.all_requests;
    s.all_prompt_tokens += r.prompt_tokens;
    s.all_output_tokens += r.output_tokens;
    if (r.warmup) continue;
    ++s.requests;
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    t_first = std::min(t_first, r.start_s);
    t_last = std::max(t_last, r.start_s + r.e2e_s);
    if (!r.finish_reason.empty()) ++s.finish_reasons[r.finish_reason];
    if (!r.Ok()) {
      ++s.failed;
      ++s.errors[r.grpc_code != 0 ? GrpcCodeName(r.grpc_code)
                                  : absl::StrCat("finish:", r.finish_reason.empty() ? "none" : r.finish_reason)];
      continue;
    }
    ++s.succeeded;
    if (MeetsSlo(r, slo)) ++s.good;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s * 1e3);
    if (r.output_tokens > 1) tpot.push_back(r.TpotS() * 1e3);
    for (double v : r.itl_s) itl.push_back(v * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
  }
  s.duration_s = s.requests > 0 ? std::max(t_last - t_first, 1e-9) : 0;
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.succeeded) / s.duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / s.duration_s;
    s.total_token_throughput = static_cast<double>(s.prompt_tokens + s.output_tokens) / s.duration_s;
    s.goodput = static_cast<double>(s.good) / s.duration_s;
  }
  s.attainment = s.requests > 0 ? static_cast<double>(s.good) / static_cast<double>(s.requests) : 0;
  s.ttft_ms = Summary::Of(ttft);
  s.tpot_ms = Summary::Of(tpot);
  s.itl_ms = Summary::Of(itl);
  s.e2e_ms = Summary::Of(e2e);
  return s;
}

}  // namespace beacon::loadtest
