// The engine thread: owns the scheduler (and through it every sequence's KV,
// kv/serving/kv_cache_manager.h) and the GenerationEngine (model state). Front-end threads only post to its inbox
// (Submit, Cancel) and hear back through each request's RequestSink.
//
// Each iteration drains the inbox (so a cancel frees its blocks before the
// next step runs), then runs one scheduler step; with nothing to do it
// sleeps on a condition variable.
//
// Engine failure (issue 35). A step that fails (a device error, an
// allocation failure) ends the requests in it with finish_reason error and
// the engine's message; the next step may succeed, and the loop goes on.
// After SetFailurePolicy's number of failed steps in a row the engine counts
// as broken: every request still queued ends with the same error, new ones
// are refused UNAVAILABLE, failure() says why (readiness reports it), and
// the owner hears it once (beacon-serve exits non-zero so that its
// orchestrator restarts the replica, rather than staying up, ready in name,
// failing everything sent to it).
//
// Thread ownership: Submit/Cancel/BeginDrain/Stats from any thread; the rest
// of the state belongs to the loop thread.
#ifndef BEACON_ENGINE_SERVING_ENGINE_LOOP_H_
#define BEACON_ENGINE_SERVING_ENGINE_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "engine/serving/generation_engine.h"
#include "engine/serving/step_watchdog.h"
#include "scheduler/scheduler.h"
#include "util/mutex.h"

namespace beacon {

// A snapshot for health checks, metrics and tests; updated every iteration.
struct LoopStats {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t inflight = 0;  // submitted and not yet finished or rejected
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;  // allocatable: free and idle cached blocks
  // Prefix cache: blocks indexed, and of those the idle ones (held by no
  // sequence, counted in kv_blocks_free); both 0 when it is off.
  int32_t prefix_cache_blocks = 0;
  int32_t prefix_cache_idle_blocks = 0;
  bool prefix_cache = false;
  int32_t kv_blocks_reserved = 0;
  int32_t compressing = 0;        // running sequences under a compressing policy
  int64_t kv_cached_tokens = 0;   // KV slots held by live sequences
  int64_t kv_logical_tokens = 0;  // what a full cache would hold for them
  EngineTotals totals;
  int64_t finished = 0;  // requests that reached a final record
  int64_t rejected = 0;
  int32_t last_step_batch = 0;  // sequences in the last step
  int32_t last_step_tokens = 0;
  // Read at Stats() time, not by the loop thread (which a hung step holds):
  // the engine is broken (failure()), and how long the step in progress has
  // run (0 between steps).
  bool broken = false;
  double step_running_seconds = 0;
};

class EngineLoop {
 public:
  // Pointers must outlive the loop. Starts the thread.
  // `observer` (optional) hears about tokens, finishes, rejections and steps.
  // `prefix_cache_salt`: turns automatic prefix caching on with that salt
  // (KvCacheManager::EnablePrefixCache, GenerationEngine::PrefixCacheSaltFor).
  EngineLoop(Backend* backend, KvCache* cache, const Tokenizer* tokenizer, const ModelConfig& config,
             const SchedulerConfig& scheduler_config, EngineObserver* observer = nullptr,
             std::optional<uint64_t> prefix_cache_salt = std::nullopt);
  // Stop()s.
  ~EngineLoop();

  // Queues a validated request. UNAVAILABLE (synchronously) while draining
  // or stopped. Otherwise the sink hears OnRejected (queue full, footprint
  // larger than the pool) or tokens and exactly one OnFinish.
  absl::StatusOr<RequestId> Submit(PreparedRequest request, std::shared_ptr<RequestSink> sink) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues the n samples of one request (ExpandSamples) together, with
  // consecutive ids from the one returned: sample 0 runs the prompt, the
  // others share its prompt blocks (scheduler/scheduler.h, "Shared
  // prefixes"). Each sample's sink hears as Submit's does. REQUIRES samples.size() ==
  // sinks.size() >= 1.
  absl::StatusOr<RequestId> SubmitGroup(std::vector<PreparedRequest> samples,
                                        std::vector<std::shared_ptr<RequestSink>> sinks) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a request (client gone): its final record says `cancelled`, its
  // blocks are free before the next step. Unknown or finished ids: no-op.
  void Cancel(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);

  // Refuses new requests from now on; running ones go on.
  void BeginDrain();
  bool draining() const { return draining_.load(); }
  // Cancels every request (drain timeout).
  void CancelAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels everything and joins the thread. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  LoopStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // After `max_failed_steps` failed steps in a row (0: never) the engine is
  // broken (see "Engine failure" above); `on_failed` then runs once, on the
  // loop thread, with failure(). Call before the first Submit.
  void SetFailurePolicy(int32_t max_failed_steps, std::function<void(const absl::Status&)> on_failed)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A step that runs longer than `timeout` breaks the engine as failed steps
  // do, while it still runs (engine/serving/step_watchdog.h): failure()
  // names the timeout, `on_failed` runs (on the watchdog's thread), new
  // requests are refused. Zero: never (the default). Call before the first
  // Submit.
  void SetStepTimeout(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // The step in progress has passed the step timeout and not returned: the
  // loop thread cannot be joined (Stop() would wait for it), so an owner
  // that must exit does so without stopping the loop.
  bool step_hung() const;
  // OK, or UNAVAILABLE saying why the engine stopped serving.
  absl::Status failure() const ABSL_LOCKS_EXCLUDED(mu_);
  bool failed() const { return failed_.load(); }

 private:
  struct SubmitCmd {
    RequestId id;
    PreparedRequest request;
    std::shared_ptr<RequestSink> sink;
  };
  struct CancelCmd {
    RequestId id;
  };
  struct CancelAllCmd {};
  using Command = std::variant<SubmitCmd, CancelCmd, CancelAllCmd>;

  void Post(Command c) ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs engine and sink callbacks, which may call Cancel(): never under mu_.
  void Handle(SubmitCmd& c) ABSL_LOCKS_EXCLUDED(mu_);
  void PublishStats(const StepReport* report) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a step's outcome; on the policy's count of failures in a row,
  // marks the engine broken and ends what is queued.
  void AfterStep(const StepReport& report) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the engine broken with `why`, once: failure(), refusals, the
  // owner's on_failed. The loop thread ends what is left after its step.
  void Break(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // UNAVAILABLE for new requests while draining, broken or stopped; OK else.
  absl::Status Accepting() const ABSL_LOCKS_EXCLUDED(mu_);

  GenerationEngine engine_;
  Scheduler scheduler_;  // after engine_: its destructor's drain ends requests in the engine
  EngineObserver* observer_;

  mutable Mutex mu_;
  CondVar cv_;  // signalled (outside mu_) on a new command and on stop
  std::deque<Command> inbox_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  LoopStats stats_ ABSL_GUARDED_BY(mu_);
  int32_t max_failed_steps_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(const absl::Status&)> on_failed_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
  int32_t failed_steps_ = 0;            // in a row; the loop thread's
  bool aborted_after_failure_ = false;  // the loop thread's
  std::unique_ptr<StepWatchdog> watchdog_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int32_t> inflight_{0};
  std::atomic<int64_t> finished_{0};
  std::atomic<int64_t> rejected_{0};
  std::thread thread_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_ENGINE_LOOP_H_
