#include "planner/workload.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace beacon::planner {

int32_t LengthDist::Sample(std::mt19937_64& rng) const {
  double v = a;
  switch (kind) {
    case Kind::kFixed: break;
    case Kind::kUniform: {
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(a), static_cast<int64_t>(b));
      v = static_cast<double>(d(rng));
      break;
    }
    case Kind::kNormal: {
      std::normal_distribution<double> d(a, b);
      v = b > 0 ? d(rng) : a;
      break;
    }
    case Kind::kLognormal: {
      // Lengths with mean a and standard deviation b.
      const double s2 = std::log1p((b * b) / (a * a));
      std::lognormal_distribution<double> d(std::log(a) - s2 / 2, std::sqrt(s2));
      v = b > 0 ? d(rng) : a;
      break;
    }
  }
  return static_cast<int32_t>(std::clamp(std::llround(v), 1LL, static_cast<long long>(INT32_MAX / 2)));
}

double LengthDist::Mean() const { return kind == Kind::kUniform ? (a + b) / 2 : a; }

absl::StatusOr<LengthDist> ParseLengthDist(std::string_view spec, std::string_view field) {
  const std::string forms = "fixed:N, uniform:A:B, normal:MEAN:STD or lognormal:MEAN:STD";
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ": '", std::string(spec), "' ", why, " (expected ", forms, ")"));
  };
  std::vector<std::string> parts = absl::StrSplit(absl::string_view(spec.data(), spec.size()), ':');
  if (parts.size() == 1) parts.insert(parts.begin(), "fixed");  // a bare integer, as beacon-loadtest
  LengthDist d;
  d.spec = std::string(spec);
  const std::string& kind = parts[0];
  size_t want = 0;
  if (kind == "fixed") {
    d.kind = LengthDist::Kind::kFixed, want = 2;
  } else if (kind == "uniform") {
    d.kind = LengthDist::Kind::kUniform, want = 3;
  } else if (kind == "normal") {
    d.kind = LengthDist::Kind::kNormal, want = 3;
  } else if (kind == "lognormal") {
    d.kind = LengthDist::Kind::kLognormal, want = 3;
  } else {
    return bad(absl::StrCat("has unknown distribution '", kind, "'"));
  }
  if (parts.size() != want) return bad(absl::StrCat("needs ", want - 1, " number(s) after '", kind, ":'"));
  double v[2] = {0, 0};
  for (size_t i = 1; i < want; ++i) {
    if (!absl::SimpleAtod(parts[i], &v[i - 1]) || !std::isfinite(v[i - 1])) {
      return bad(absl::StrCat("has a bad number '", parts[i], "'"));
    }
  }
  d.a = v[0];
  d.b = v[1];
  const bool integral = std::floor(d.a) == d.a && (want == 2 || std::floor(d.b) == d.b);
  switch (d.kind) {
    case LengthDist::Kind::kFixed:
      if (d.a < 1 || !integral) return bad("needs an integer N >= 1");
      break;
    case LengthDist::Kind::kUniform:
      if (d.a < 1 || d.b < d.a || !integral) return bad("needs integers 1 <= A <= B");
      break;
    case LengthDist::Kind::kNormal:
    case LengthDist::Kind::kLognormal:
      if (!(d.a > 0) || d.b < 0) return bad("needs a mean M > 0 and a standard deviation S >= 0");
      break;
  }
  if (d.a > 1e8 || d.b > 1e8) return bad("is too large (over 1e8 tokens)");
  return d;
}

absl::Status WorkloadSpec::Validate() const {
  if (arrival == ArrivalKind::kPoisson && !(rate > 0 && std::isfinite(rate))) {
    return absl::InvalidArgumentError(absl::StrCat("rate: must be > 0 requests/s, got ", rate));
  }
  if (arrival == ArrivalKind::kClosedLoop && concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat("concurrency: must be >= 1, got ", concurrency));
  }
  if (num_requests < 1) return absl::InvalidArgumentError(absl::StrCat("requests: must be >= 1, got ", num_requests));
  if (max_tokens < 0) return absl::InvalidArgumentError(absl::StrCat("max_tokens: must be >= 0, got ", max_tokens));
  return absl::OkStatus();
}

std::string WorkloadSpec::Describe() const {
  const std::string arr = arrival == ArrivalKind::kPoisson ? absl::StrFormat("Poisson %.4g req/s", rate)
                                                           : absl::StrFormat("closed loop x%d", concurrency);
  return absl::StrFormat("%s, %d requests, prompt %s, output %s%s", arr, num_requests, prompt.spec, output.spec,
                         max_tokens > 0 ? absl::StrFormat(", max_tokens %d", max_tokens) : std::string());
}

std::vector<PlannedRequest> GenerateRequests(const WorkloadSpec& w, int32_t context_length) {
  std::mt19937_64 lengths(w.seed);
  std::mt19937_64 gaps(w.seed ^ 0x9e3779b97f4a7c15ULL);
  std::exponential_distribution<double> unit_gap(1.0);
  std::vector<PlannedRequest> out;
  out.reserve(w.num_requests);
  double t = 0;
  for (int32_t i = 0; i < w.num_requests; ++i) {
    PlannedRequest r;
    r.prompt_tokens = std::min(w.prompt.Sample(lengths), std::max(1, context_length - 1));
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
