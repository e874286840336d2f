#include "loadtest/vllm_result.h"

#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace beacon::loadtest {
namespace {

using json = nlohmann::json;

// Population standard deviation (NumPy's np.std default, which vLLM uses).
double StdDev(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size()));
}

void AddMetric(json* out, const char* name, const std::vector<double>& ms) {
  const Summary s = Summary::Of(ms);
  (*out)[absl::StrCat("mean_", name, "_ms")] = s.mean;
  (*out)[absl::StrCat("median_", name, "_ms")] = s.median;
  (*out)[absl::StrCat("std_", name, "_ms")] = StdDev(ms);
  (*out)[absl::StrCat("p90_", name, "_ms")] = s.p90;
  (*out)[absl::StrCat("p99_", name, "_ms")] = s.p99;
}

}  // namespace

json VllmResultJson(const Config& c, const v1::ModelInfo& info, const RunSummary& s,
                    const std::vector<RequestResult>& results) {
  std::vector<double> ttft, tpot, itl, e2el;
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(), itls = json::array(),
       errors = json::array();
  for (const RequestResult& r : results) {
    if (r.warmup) continue;
    input_lens.push_back(r.prompt_tokens);
    output_lens.push_back(r.Ok() ? r.output_tokens : 0);  // vLLM counts a failed request's output as 0
    ttfts.push_back(r.ttft_s >= 0 ? r.ttft_s : 0.0);
    itls.push_back(r.itl_s);
    errors.push_back(r.Ok() ? "" : (r.error.empty() ? absl::StrCat("finish:", r.finish_reason) : r.error));
    if (!r.Ok()) continue;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s * 1e3);
    if (r.output_tokens > 1) tpot.push_back(r.TpotS() * 1e3);
    for (double v : r.itl_s) itl.push_back(v * 1e3);
    e2el.push_back(r.e2e_s * 1e3);
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y%m%d-%H%M%S", std::localtime(&now));
  json out = {
      {"date", date},
      {"backend", std::string(BackendName(c.client.backend))},
      {"model_id", info.model()},
      {"tokenizer_id", info.model()},
      {"num_prompts", s.requests},
      {"request_rate", c.load.rate > 0 ? (std::isinf(c.load.rate) ? json("inf") : json(c.load.rate)) : json("inf")},
      {"burstiness", c.load.burstiness},
      {"max_concurrency", c.load.concurrency > 0 ? json(c.load.concurrency) : json()},
      {"duration", s.duration_s},
      {"completed", s.succeeded},
      {"failed", s.failed},
      {"total_input_tokens", s.prompt_tokens},
      {"total_output_tokens", s.output_tokens},
      {"request_throughput", s.request_throughput},
      {"request_goodput", s.slo.empty() ? json() : json(s.goodput)},
      {"output_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"input_lens", input_lens},
      {"output_lens", output_lens},
      {"ttfts", ttfts},
      {"itls", itls},
      {"errors", errors},
      {"label", c.label},
      {"dataset", c.dataset.empty() ? "random" : c.dataset},
  };
  AddMetric(&out, "ttft", ttft);
  AddMetric(&out, "tpot", tpot);
  AddMetric(&out, "itl", itl);
  AddMetric(&out, "e2el", e2el);
  return out;
}

}  // namespace beacon::loadtest
