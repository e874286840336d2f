// Distributions of prompt and output lengths (in tokens), from specs such as
// `fixed:128`, `uniform:64:256`, `normal:512:128`, `lognormal:512:256`.
//
// `normal` and `lognormal` take the MEAN and STD of the lengths themselves
// (the lognormal's underlying mu and sigma are derived from them); every
// sample is rounded to an integer and clamped to [1, INT32_MAX / 2] (so two
// lengths add without overflow). A bare integer is accepted as `fixed:N`;
// parameters over 1e8 tokens are rejected.
//
// One implementation shared by beacon-loadtest (loadtest/) and the capacity
// planner (planner/); part of `beacon_workload`, which needs no gRPC.
// Sampling is deterministic in the generator's state: the same seed draws the
// same lengths in both tools.
#ifndef BEACON_WORKLOAD_LENGTH_DIST_H_
#define BEACON_WORKLOAD_LENGTH_DIST_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace beacon::workload {

class LengthDist {
 public:
  enum class Kind { kFixed, kUniform, kNormal, kLogNormal };

  // Parses `spec`; errors are INVALID_ARGUMENT and start with `flag` (e.g.
  // "--prompt-len") so the user sees which option is wrong.
  static absl::StatusOr<LengthDist> Parse(absl::string_view spec, absl::string_view flag);
  // Always `n` (values below 1 become 1).
  static LengthDist Fixed(int32_t n);

  // One length in [1, INT32_MAX / 2]; draws from `rng` (none for fixed or a
  // zero STD).
  int32_t Sample(std::mt19937_64& rng) const;

  Kind kind() const { return kind_; }
  // The distribution's nominal mean (before rounding and clamping).
  double Mean() const;
  // The spec in canonical form, e.g. "uniform:64:256" ("128" gives "fixed:128");
  // Parse(ToString()) gives the same distribution.
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kFixed;
  double a_ = 1, b_ = 0;  // fixed: N; uniform: A, B; normal/lognormal: MEAN, STD
};

}  // namespace beacon::workload

#endif  // BEACON_WORKLOAD_LENGTH_DIST_H_
