// A request as the scheduler sees it: sizes, KV footprint, deadline, state.
// The tokens themselves live in the engine (StepEngine); the scheduler only
// counts them.
//
// Thread ownership: the engine thread.
#ifndef BEACON_SCHEDULER_REQUEST_H_
#define BEACON_SCHEDULER_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <string_view>

namespace beacon {

using RequestId = uint64_t;
using SchedClock = std::chrono::steady_clock;

// Ordered: every state from kFinishedStopped on is terminal (IsFinished).
enum class RequestState {
  kWaiting,            // queued, holds no KV
  kRunning,            // admitted: prefilling or decoding
  kPreempted,          // KV taken back (optimistic mode); waits to recompute
  kFinishedStopped,    // EOS, stop token or stop string
  kFinishedLength,     // max_tokens or context length
  kFinishedTimeLimit,  // its deadline passed
  kFinishedCancelled,  // the client went away, or the server cancelled it
  kFinishedError,      // the engine failed it
};

inline bool IsFinished(RequestState s) { return s >= RequestState::kFinishedStopped; }
std::string_view RequestStateName(RequestState s);

struct SchedRequest {
  RequestId id = 0;
  int32_t prompt_tokens = 0;   // >= 1
  int32_t max_new_tokens = 0;  // >= 1, already clamped to the context
  // KV slots the sequence can ever hold (EvictionSchedule::PeakSlots,
  // clamped to the context): what reserve-mode admission sets aside.
  int32_t peak_slots = 0;
  SchedClock::time_point arrival{};
  SchedClock::time_point deadline = SchedClock::time_point::max();

  // Scheduler bookkeeping.
  RequestState state = RequestState::kWaiting;
  int32_t prefill_target = 0;  // tokens to run before decoding (prompt, or prompt + output on recompute)
  int32_t prefill_done = 0;
  int32_t generated = 0;        // tokens sampled so far
  int32_t reserved_blocks = 0;  // reserve mode: blocks at peak beyond the shared ones
  int32_t shared_blocks = 0;    // leading blocks it took by reference at admission
  int32_t preemptions = 0;
  uint64_t admit_seq = 0;                    // admission order (preemption victims: newest first)
  SchedClock::time_point first_scheduled{};  // first admission (queue time ends)
  bool scheduled_once = false;

  bool prefilling() const { return prefill_done < prefill_target; }
};

}  // namespace beacon

#endif  // BEACON_SCHEDULER_REQUEST_H_
