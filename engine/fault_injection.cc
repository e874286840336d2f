#include "engine/fault_injection.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace beacon {

absl::Status FailingStepsBackend::Next() {
  if (++steps_ <= ok_steps_) return absl::OkStatus();
  while (fault_ == Fault::kHang) std::this_thread::sleep_for(std::chrono::hours(1));
  return absl::InternalError(
      absl::StrCat("injected device failure on step ", steps_, " (--debug-fail-steps-after ", ok_steps_, ")"));
}

absl::Status FailingStepsBackend::Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) {
  if (absl::Status s = Next(); !s.ok()) return s;
  return inner_->Forward(batch, logits);
}

absl::Status FailingStepsBackend::ForwardGreedy(std::span<const ForwardEntry> batch, std::vector<int32_t>* tokens) {
  if (absl::Status s = Next(); !s.ok()) return s;
  return inner_->ForwardGreedy(batch, tokens);
}

absl::Status FailingStepsBackend::ForwardSample(std::span<const ForwardEntry> batch,
                                                std::span<const EntrySampling> sampling, std::vector<int32_t>* tokens) {
  if (absl::Status s = Next(); !s.ok()) return s;
  return inner_->ForwardSample(batch, sampling, tokens);
}

}  // namespace beacon
