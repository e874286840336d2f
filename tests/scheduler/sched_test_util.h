// Test helpers: a SimEngine and a Scheduler over it on a virtual clock
// (t0 + step * 10 ms), with spec builders.
#ifndef BEACON_TESTS_SCHEDULER_SCHED_TEST_UTIL_H_
#define BEACON_TESTS_SCHEDULER_SCHED_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/sequence_compressor.h"
#include "scheduler/scheduler.h"
#include "scheduler/sim_engine.h"

namespace beacon::schedtest {

using namespace std::chrono_literals;

inline SimSequenceSpec Full(int32_t prompt, int32_t output, int32_t max_new) {
  SimSequenceSpec s;
  s.prompt_tokens = prompt;
  s.output_tokens = output;
  s.max_new_tokens = max_new;
  s.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  return s;
}

// beacon, keep_prompt, the given budget and interval.
inline SimSequenceSpec Beacon(int32_t prompt, int32_t output, int32_t max_new, int32_t budget = 64,
                              int32_t interval = 16) {
  SimSequenceSpec s = Full(prompt, output, max_new);
  s.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  s.kv.budget = budget;
  s.kv.interval = interval;
  s.kv.keep_prompt = true;
  return s;
}

inline int32_t Ceil(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

inline SchedulerConfig Config(AdmissionMode mode = AdmissionMode::kReserve, int32_t max_running = 64,
                              int32_t max_step_tokens = 512, int32_t chunk = 256) {
  SchedulerConfig c;
  c.admission = mode;
  c.max_running = max_running;
  c.max_step_tokens = max_step_tokens;
  c.prefill_chunk = chunk;
  c.max_waiting = 4096;
  return c;
}

struct Harness {
  Harness(const SchedulerConfig& config, int32_t blocks, int32_t block_size = 16)
      : engine(blocks, block_size), sched(config, engine.mutable_cache(), &engine) {
    EXPECT_TRUE(config.Validate().ok()) << config.Validate();
  }

  SchedClock::time_point Now() const { return t0 + steps * 10ms; }

  // Registers the sequence with the engine and queues it.
  absl::Status Add(RequestId id, const SimSequenceSpec& spec,
                   std::optional<SchedClock::duration> deadline = std::nullopt) {
    SchedRequest r = MakeSimRequest(id, spec);
    r.arrival = Now();
    if (deadline) r.deadline = Now() + *deadline;
    return AddSimRequest(sched, engine, id, spec, r);
  }

  // The time a step's tokens come out: 4 ms into the step.
  SchedClock::time_point TokenTime() const { return Now() + 4ms; }

  StepReport Step() {
    engine.SetTime(TokenTime());
    StepReport r = sched.Step(Now());
    ++steps;
    EXPECT_TRUE(r.engine_status.ok()) << "step " << steps << ": " << r.engine_status;
    preempted += r.preempted;
    admitted += r.admitted;
    finished += r.finished;
    tokens += r.tokens;
    max_running = std::max(max_running, sched.num_running());
    return r;
  }

  // Steps until the scheduler has no work; false if `max_steps` ran out.
  bool RunUntilIdle(int64_t max_steps = 1000000) {
    for (int64_t i = 0; i < max_steps && sched.HasWork(); ++i) Step();
    return !sched.HasWork();
  }

  // Every request's end as the engine saw it: state, token count, one Remove.
  void ExpectFinishedNormally(RequestId id, const SimSequenceSpec& spec) {
    SCOPED_TRACE("request " + std::to_string(id));
    auto it = engine.records().find(id);
    ASSERT_NE(it, engine.records().end());
    const SimEngine::Record& r = it->second;
    const bool by_length = spec.output_tokens >= spec.max_new_tokens;
    EXPECT_EQ(r.state, by_length ? RequestState::kFinishedLength : RequestState::kFinishedStopped);
    EXPECT_EQ(r.generated, by_length ? spec.max_new_tokens : spec.output_tokens);
    EXPECT_EQ(r.sched_generated, r.generated);
    EXPECT_EQ(r.sched_preemptions, r.preemptions);
    EXPECT_EQ(r.remove_calls, 1);
  }

  // Declared before the scheduler: it outlives it (the scheduler's
  // destructor removes what is left).
  SimEngine engine;
  Scheduler sched;
  SchedClock::time_point t0 = SchedClock::time_point{} + 1000s;
  int64_t steps = 0;
  int64_t preempted = 0;  // sums of the StepReports
  int64_t admitted = 0;
  int64_t finished = 0;
  int64_t tokens = 0;
  int32_t max_running = 0;
};

}  // namespace beacon::schedtest

#endif  // BEACON_TESTS_SCHEDULER_SCHED_TEST_UTIL_H_
