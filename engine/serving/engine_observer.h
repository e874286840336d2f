// Hooks the engine thread calls as requests progress, for metrics: the
// engine loop after each step (OnStep, and the step's token latencies from
// the scheduler's records), the engine as a request ends (OnFinish). Kept
// apart from any metrics library so the engine and its tests need none.
// Implementations must be cheap and must not block: they run on the engine
// thread inside a step.
#ifndef BEACON_ENGINE_SERVING_ENGINE_OBSERVER_H_
#define BEACON_ENGINE_SERVING_ENGINE_OBSERVER_H_

#include "absl/status/status.h"
#include "engine/serving/request_sink.h"
#include "scheduler/scheduler.h"

namespace beacon {

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // A request's first token, `seconds` after its arrival.
  virtual void OnFirstToken(double seconds) {}
  // A later token, `seconds` after the same request's previous one.
  virtual void OnInterToken(double seconds) {}
  // The request's final record (every accepted request, once).
  virtual void OnFinish(const StreamFinal& final) {}
  // A request refused before it ran, with the status its client got.
  virtual void OnRejected(const absl::Status& status) {}
  // One engine step: what ran and how long it took.
  virtual void OnStep(const StepReport& report, double seconds) {}
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_ENGINE_OBSERVER_H_
