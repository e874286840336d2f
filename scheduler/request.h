// A request's one record: who it is, its sizes and KV footprint, its
// deadline, where it is (state, prefill progress, tokens sampled) and when
// things happened to it (arrival, first scheduled, first and last token). The
// scheduler owns it from Add to the request's end and hands it to
// StepEngine::Remove, which builds the client's final record from it. The
// engine keeps only what the forward pass and the output stream need, keyed
// by the id: the tokens (a Generation), the sampler, the compressor, the sink.
//
// Thread ownership: the engine thread.
#ifndef BEACON_SCHEDULER_REQUEST_H_
#define BEACON_SCHEDULER_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <string>
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
  std::string name;            // the client's request id, for its final record and logs (may be empty)
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
  // Prompt tokens it took by reference at its first admission (the prefix
  // cache, a sample group's prompt): what the client sees as cached tokens.
  int32_t cached_tokens = 0;
  uint64_t admit_seq = 0;                    // admission order (preemption victims: newest first)
  SchedClock::time_point first_scheduled{};  // first admission (queue time ends)
  bool scheduled_once = false;
  // When the engine produced its first and latest sampled token
  // (SeqResult::at); meaningful once generated > 0.
  SchedClock::time_point first_token{};
  SchedClock::time_point last_token{};

  bool prefilling() const { return prefill_done < prefill_target; }
};

}  // namespace beacon

#endif  // BEACON_SCHEDULER_REQUEST_H_
