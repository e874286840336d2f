#include "loadtest/arrival.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace beacon::loadtest {

absl::Status ValidateArrival(double rate, double burstiness) {
  if (std::isnan(rate) || !(rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--rate must be a positive number of requests/s, got ", rate));
  }
  if (!std::isfinite(burstiness) || !(burstiness > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--burstiness must be a positive number (1 = Poisson), got ", burstiness));
  }
  return absl::OkStatus();
}

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : rate_(rate),
      burstiness_(burstiness),
      rng_(seed),
      gamma_(burstiness, std::isinf(rate) ? 1.0 : 1.0 / (rate * burstiness)) {}

double ArrivalProcess::NextGap() {
  if (std::isinf(rate_)) return 0.0;
  return gamma_(rng_);
}

double ArrivalProcess::GapCv(double burstiness) { return 1.0 / std::sqrt(burstiness); }

}  // namespace beacon::loadtest
