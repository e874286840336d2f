// Distributions of prompt and output lengths (in tokens), from specs such as
// `fixed:128`, `uniform:64:256`, `normal:512:128`, `lognormal:512:256`.
//
// `normal` and `lognormal` take the MEAN and STD of the lengths themselves
// (the lognormal's underlying mu and sigma are derived from them); every
// sample is rounded to an integer and clamped to at least 1. A bare integer
// is accepted as `fixed:N`.
#ifndef BEACON_LOADTEST_LENGTH_DIST_H_
#define BEACON_LOADTEST_LENGTH_DIST_H_

#include <cstdint>
#include <random>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace beacon::loadtest {

class LengthDist {
 public:
  enum class Kind { kFixed, kUniform, kNormal, kLogNormal };

  // Parses `spec`; errors are INVALID_ARGUMENT and start with `flag` (e.g.
  // "--prompt-len") so the user sees which option is wrong.
  static absl::StatusOr<LengthDist> Parse(absl::string_view spec, absl::string_view flag);
  static LengthDist Fixed(int32_t n);

  // One length >= 1.
  int32_t Sample(std::mt19937_64& rng) const;

  Kind kind() const { return kind_; }
  // The distribution's nominal mean (before rounding and clamping).
  double Mean() const;
  // The spec in canonical form, e.g. "uniform:64:256".
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kFixed;
  double a_ = 1, b_ = 0;  // fixed: N; uniform: A, B; normal/lognormal: MEAN, STD
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_LENGTH_DIST_H_
