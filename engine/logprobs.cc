#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace beacon {

absl::StatusOr<LogprobsMode> ParseLogprobsMode(std::string_view name) {
  if (name == "raw") return LogprobsMode::kRaw;
  if (name == "processed") return LogprobsMode::kProcessed;
  return absl::InvalidArgumentError(absl::StrCat("logprobs mode: '", std::string(name), "' is not raw or processed"));
}

std::string_view LogprobsModeName(LogprobsMode mode) { return mode == LogprobsMode::kRaw ? "raw" : "processed"; }

PositionLogprobs LogprobsAt(std::span<const float> logits, float inv_temperature, int32_t id, int32_t top_n) {
  const size_t n = logits.size();
  auto value = [&](size_t i) -> double {
    const float v = logits[i];
    return std::isnan(v) ? -std::numeric_limits<double>::infinity() : static_cast<double>(v) * inv_temperature;
  };
  double max = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) max = std::max(max, value(i));
  // log sum exp; every logit -inf (or +inf) leaves no finite distribution:
  // the maximum's tokens then share it (log of their count, below).
  double sum = 0.0;
  size_t at_max = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = value(i);
    if (v == max) ++at_max;
    if (std::isfinite(max)) sum += std::exp(v - max);
  }
  const double log_z = std::isfinite(max) ? max + std::log(sum) : 0.0;
  auto logprob = [&](size_t i) -> float {
    const double v = value(i);
    if (!std::isfinite(max)) return v == max ? static_cast<float>(-std::log(static_cast<double>(at_max))) : -INFINITY;
    return static_cast<float>(v - log_z);
  };

  PositionLogprobs out;
  out.id = id;
  out.logprob = logprob(static_cast<size_t>(id));
  const double mine = value(static_cast<size_t>(id));
  int32_t above = 0;
  for (size_t i = 0; i < n; ++i) above += value(i) > mine;
  out.rank = above + 1;

  const size_t k = std::min(n, static_cast<size_t>(std::clamp(top_n, 0, kMaxTopLogprobs)));
  if (k > 0) {
    // A running top-k: k <= 20, so insertion into a sorted array beats a
    // heap and keeps the order (value descending, then id ascending).
    std::vector<std::pair<double, int32_t>> best;
    best.reserve(k + 1);
    auto before = [](const std::pair<double, int32_t>& a, const std::pair<double, int32_t>& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    for (size_t i = 0; i < n; ++i) {
      const std::pair<double, int32_t> e{value(i), static_cast<int32_t>(i)};
      if (best.size() == k && !before(e, best.back())) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), e, before), e);
      if (best.size() > k) best.pop_back();
    }
    out.top.reserve(k);
    for (const auto& [v, t] : best) out.top.push_back(TokenLogprob{t, logprob(static_cast<size_t>(t))});
  }
  return out;
}

}  // namespace beacon
