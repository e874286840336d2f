#include "planner/workload.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon::planner {

absl::Status WorkloadSpec::Validate() const {
  if (arrival == ArrivalKind::kPoisson && !(rate > 0 && std::isfinite(rate))) {
    return absl::InvalidArgumentError(absl::StrCat("rate: must be > 0 requests/s, got ", rate));
  }
  if (arrival == ArrivalKind::kClosedLoop && concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat("concurrency: must be >= 1, got ", concurrency));
  }
  if (num_requests < 1) return absl::InvalidArgumentError(absl::StrCat("requests: must be >= 1, got ", num_requests));
  if (max_tokens < 0) return absl::InvalidArgumentError(absl::StrCat("max_tokens: must be >= 0, got ", max_tokens));
  if (shared_prefix < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shared_prefix: must be >= 0 tokens, got ", shared_prefix));
  }
  if (!(share_ratio >= 0 && share_ratio <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("share_ratio: must be in [0, 1], got ", share_ratio));
  }
  return absl::OkStatus();
}

std::string WorkloadSpec::Describe() const {
  const std::string arr = arrival == ArrivalKind::kPoisson ? absl::StrFormat("Poisson %.4g req/s", rate)
                                                           : absl::StrFormat("closed loop x%d", concurrency);
  return absl::StrFormat("%s, %d requests, prompt %s, output %s%s", arr, num_requests, prompt.ToString(),
                         output.ToString(),
                         max_tokens > 0 ? absl::StrFormat(", max_tokens %d", max_tokens) : std::string()) +
         (shared_prefix > 0 && share_ratio > 0
              ? absl::StrFormat(", %.0f%% share a %d-token prefix", 100 * share_ratio, shared_prefix)
              : std::string());
}

std::vector<PlannedRequest> GenerateRequests(const WorkloadSpec& w, int32_t context_length) {
  std::mt19937_64 lengths(w.seed);
  std::mt19937_64 gaps(w.seed ^ 0x9e3779b97f4a7c15ULL);
  std::exponential_distribution<double> unit_gap(1.0);
  // Its own stream: a share ratio changes no length or arrival.
  std::mt19937_64 shares(w.seed ^ 0x5851f42d4c957f2dULL);
  std::bernoulli_distribution shares_prefix(w.share_ratio);
  std::vector<PlannedRequest> out;
  out.reserve(w.num_requests);
  double t = 0;
  for (int32_t i = 0; i < w.num_requests; ++i) {
    PlannedRequest r;
    const bool shared = w.shared_prefix > 0 && shares_prefix(shares);
    r.prefix_tokens = shared ? std::min(w.shared_prefix, std::max(0, context_length - 2)) : 0;
    r.prompt_tokens = std::min(r.prefix_tokens + w.prompt.Sample(lengths), std::max(1, context_length - 1));
    r.output_tokens = w.output.Sample(lengths);
    const int32_t asked = w.max_tokens > 0 ? w.max_tokens : r.output_tokens;
    r.max_new_tokens = std::max(1, std::min(asked, context_length - r.prompt_tokens));
    // The first request opens the run at t = 0.
    if (w.arrival == ArrivalKind::kPoisson) r.arrival_s = t;
    t += unit_gap(gaps) / (w.arrival == ArrivalKind::kPoisson ? w.rate : 1.0);
    out.push_back(r);
  }
  return out;
}

}  // namespace beacon::planner
