#include "workload/length_dist.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace beacon::workload {
namespace {

// Larger parameters are typos, not workloads.
constexpr double kMaxParam = 1e8;

constexpr char kForms[] = "expected fixed:N, uniform:A:B, normal:MEAN:STD or lognormal:MEAN:STD";

int32_t ClampRound(double v) {
  if (!std::isfinite(v)) return 1;
  return static_cast<int32_t>(std::clamp(std::llround(v), 1LL, static_cast<long long>(INT32_MAX / 2)));
}

}  // namespace

LengthDist LengthDist::Fixed(int32_t n) {
  LengthDist d;
  d.kind_ = Kind::kFixed;
  d.a_ = std::max(n, 1);
  return d;
}

absl::StatusOr<LengthDist> LengthDist::Parse(absl::string_view spec, absl::string_view flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why, " in '", spec, "' (", kForms, ")"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  double bare;
  if (parts.size() == 1 && absl::SimpleAtod(parts[0], &bare)) parts.insert(parts.begin(), "fixed");  // "128"
  const absl::string_view kind = parts[0];
  std::vector<double> nums;
  for (size_t i = 1; i < parts.size(); ++i) {
    double v;
    if (!absl::SimpleAtod(parts[i], &v) || !std::isfinite(v)) {
      return bad(absl::StrCat("'", parts[i], "' is not a number"));
    }
    nums.push_back(v);
  }
  LengthDist d;
  if (kind == "fixed") {
    if (nums.size() != 1) return bad("fixed takes one value");
    if (nums[0] < 1 || nums[0] != std::floor(nums[0])) return bad("the length must be an integer >= 1");
    d.kind_ = Kind::kFixed;
  } else if (kind == "uniform") {
    if (nums.size() != 2) return bad("uniform takes two values");
    if (nums[0] < 1 || nums[0] != std::floor(nums[0]) || nums[1] != std::floor(nums[1])) {
      return bad("the bounds must be integers >= 1");
    }
    if (nums[1] < nums[0]) return bad("uniform needs A <= B");
    d.kind_ = Kind::kUniform;
  } else if (kind == "normal" || kind == "lognormal") {
    if (nums.size() != 2) return bad(absl::StrCat(kind, " takes MEAN and STD"));
    if (!(nums[0] > 0)) return bad("MEAN must be > 0");
    if (nums[1] < 0) return bad("STD must be >= 0");
    d.kind_ = kind == "normal" ? Kind::kNormal : Kind::kLogNormal;
  } else {
    return bad(absl::StrCat("unknown distribution '", kind, "'"));
  }
  for (double v : nums) {
    if (v > kMaxParam) return bad("too large (over 1e8 tokens)");
  }
  d.a_ = nums[0];
  d.b_ = nums.size() > 1 ? nums[1] : 0;
  return d;
}

int32_t LengthDist::Sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kFixed: return ClampRound(a_);
    case Kind::kUniform:
      return ClampRound(static_cast<double>(
          std::uniform_int_distribution<int64_t>(static_cast<int64_t>(a_), static_cast<int64_t>(b_))(rng)));
    case Kind::kNormal:
      if (b_ == 0) return ClampRound(a_);
      return ClampRound(std::normal_distribution<double>(a_, b_)(rng));
    case Kind::kLogNormal: {
      if (b_ == 0) return ClampRound(a_);
      const double sigma2 = std::log1p((b_ * b_) / (a_ * a_));
      const double mu = std::log(a_) - sigma2 / 2;
      return ClampRound(std::lognormal_distribution<double>(mu, std::sqrt(sigma2))(rng));
    }
  }
  return 1;
}

double LengthDist::Mean() const { return kind_ == Kind::kUniform ? (a_ + b_) / 2 : a_; }

std::string LengthDist::ToString() const {
  switch (kind_) {
    case Kind::kFixed: return absl::StrCat("fixed:", a_);
    case Kind::kUniform: return absl::StrCat("uniform:", a_, ":", b_);
    case Kind::kNormal: return absl::StrCat("normal:", a_, ":", b_);
    case Kind::kLogNormal: return absl::StrCat("lognormal:", a_, ":", b_);
  }
  return "";
}

}  // namespace beacon::workload
