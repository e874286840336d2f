// A failure drill: a Backend that runs another and, after a given number of
// steps, fails every later one the way a lost device or an allocation
// failure would (INTERNAL, nothing written), or (kHang) never returns from
// it, as a device that stopped answering would: the step watchdog's drill
// (--debug-hang-steps-after, engine/serving/step_watchdog.h). beacon-serve wraps its backend
// in one under --debug-fail-steps-after N, so that an operator (or a test)
// can watch what a broken engine does to the server: the affected requests
// end with a clear error, readiness turns false, and the process exits
// non-zero for its orchestrator to restart it (engine/serving/engine_loop.h,
// "Engine failure"). Off unless asked for; never on a serving path by default.
//
// Thread ownership: the engine thread, as for the backend it wraps.
#ifndef BEACON_ENGINE_FAULT_INJECTION_H_
#define BEACON_ENGINE_FAULT_INJECTION_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend.h"

namespace beacon {

class FailingStepsBackend final : public Backend {
 public:
  enum class Fault { kFail, kHang };
  // `inner` must outlive this. Steps (Forward, ForwardGreedy, ForwardSample
  // calls) 1..ok_steps run on `inner`; every later one fails (kFail) or
  // blocks its thread for good (kHang).
  FailingStepsBackend(Backend* inner, int64_t ok_steps, Fault fault = Fault::kFail)
      : inner_(inner), ok_steps_(ok_steps), fault_(fault) {}

  absl::Status Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) override;
  absl::Status ForwardGreedy(std::span<const ForwardEntry> batch, std::vector<int32_t>* tokens) override;
  bool samples_on_device() const override { return inner_->samples_on_device(); }
  absl::Status ForwardSample(std::span<const ForwardEntry> batch, std::span<const EntrySampling> sampling,
                             std::vector<int32_t>* tokens) override;
  absl::StatusOr<std::unique_ptr<KvCache>> MakeKvCache(const KvCacheShape& shape, int32_t num_blocks) override {
    return inner_->MakeKvCache(shape, num_blocks);
  }
  absl::Status CheckPolicy(const KvPolicyOptions& options) const override { return inner_->CheckPolicy(options); }
  absl::Status ReservePolicyStates(const KvPolicyOptions& options, int32_t max_sequences) override {
    return inner_->ReservePolicyStates(options, max_sequences);
  }
  size_t reserved_policy_state_bytes() const override { return inner_->reserved_policy_state_bytes(); }
  ThreadPool* host_pool() const override { return inner_->host_pool(); }
  std::string_view device() const override { return inner_->device(); }
  const ModelConfig& config() const override { return inner_->config(); }

  int64_t steps() const { return steps_; }

 private:
  // OK while the step may run; the injected failure after that.
  absl::Status Next();

  Backend* inner_;
  const int64_t ok_steps_;
  const Fault fault_;
  int64_t steps_ = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_FAULT_INJECTION_H_
