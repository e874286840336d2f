#include "engine/serving/engine_loop.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "kv/serving/prefix_cache.h"
#include "util/log.h"

namespace beacon {
namespace {

// Counts a request out of the in-flight total when it reaches its end,
// whichever way it ends, and writes the request's log record for that end
// (util/log.h: the request id on the line): one INFO line per request, ERROR
// when the engine failed it.
class CountingSink : public RequestSink {
 public:
  CountingSink(std::shared_ptr<RequestSink> inner, std::string request_id, std::atomic<int32_t>* inflight,
               std::atomic<int64_t>* finished, std::atomic<int64_t>* rejected)
      : inner_(std::move(inner)),
        request_id_(std::move(request_id)),
        inflight_(inflight),
        finished_(finished),
        rejected_(rejected) {}
  void OnTokens(std::span<const int32_t> ids, std::string_view text, TextPart part,
                std::span<const PositionLogprobs> logprobs) override {
    inner_->OnTokens(ids, text, part, logprobs);
  }
  void OnPromptLogprobs(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs) override {
    inner_->OnPromptLogprobs(prompt, logprobs);
  }
  void OnFinish(const StreamFinal& f) override {
    ++*finished_;
    inflight_->fetch_sub(1);
    LogFinish(f);
    inner_->OnFinish(f);
  }
  void OnRejected(const absl::Status& s) override {
    ++*rejected_;
    inflight_->fetch_sub(1);
    logging::Request(logging::Level::kInfo, request_id_, "rejected: %s", s.ToString());
    inner_->OnRejected(s);
  }

 private:
  void LogFinish(const StreamFinal& f) const {
    const bool failed = f.reason == FinishReason::kError;
    logging::Request(failed ? logging::Level::kError : logging::Level::kInfo, request_id_,
                     "finished: reason=%s prompt_tokens=%d completion_tokens=%d queue_ms=%.1f ttft_ms=%.1f "
                     "total_ms=%.1f kv_policy=%s kv_budget=%d peak_cached_tokens=%d evictions=%d preemptions=%d%s%s",
                     std::string(FinishReasonName(f.reason)), f.prompt_tokens, f.completion_tokens,
                     f.queue_seconds * 1e3, f.ttft_seconds * 1e3, f.total_seconds * 1e3,
                     std::string(KvPolicyName(f.kv.policy)), f.kv.budget, f.kv.peak_cached_tokens, f.kv.evictions,
                     f.kv.preemptions, failed ? " error=" : "", failed ? f.error : "");
  }

  std::shared_ptr<RequestSink> inner_;
  std::string request_id_;
  std::atomic<int32_t>* inflight_;
  std::atomic<int64_t>* finished_;
  std::atomic<int64_t>* rejected_;
};

}  // namespace

EngineLoop::EngineLoop(Backend* backend, KvCache* cache, const Tokenizer* tokenizer, const ModelConfig& config,
                       const SchedulerConfig& scheduler_config, EngineObserver* observer,
                       std::optional<uint64_t> prefix_cache_salt)
    : engine_(backend, cache, tokenizer, config), scheduler_(scheduler_config, cache, &engine_), observer_(observer) {
  engine_.set_observer(observer);
  if (prefix_cache_salt.has_value()) scheduler_.kv().EnablePrefixCache(*prefix_cache_salt);
  PublishStats(nullptr);
  watchdog_ = std::make_unique<StepWatchdog>(absl::ZeroDuration(), nullptr);  // times steps only
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() { Stop(); }

absl::Status EngineLoop::Accepting() const {
  if (failed_.load()) {
    return absl::UnavailableError(
        absl::StrCat(failure().message(), ": this replica cannot serve; send the request to another"));
  }
  if (draining_.load()) return absl::UnavailableError("the server is draining: send the request to another replica");
  return absl::OkStatus();
}

absl::StatusOr<RequestId> EngineLoop::Submit(PreparedRequest request, std::shared_ptr<RequestSink> sink) {
  if (absl::Status s = Accepting(); !s.ok()) return s;
  const RequestId id = next_id_.fetch_add(1);
  {
    MutexLock lock(&mu_);
    if (stop_) return absl::UnavailableError("the server is shutting down");
    inflight_.fetch_add(1);
    inbox_.push_back(SubmitCmd{id, std::move(request), std::move(sink)});
  }
  cv_.Signal();
  return id;
}

absl::StatusOr<RequestId> EngineLoop::SubmitGroup(std::vector<PreparedRequest> samples,
                                                  std::vector<std::shared_ptr<RequestSink>> sinks) {
  if (absl::Status s = Accepting(); !s.ok()) return s;
  const size_t n = samples.size();
  const RequestId first = next_id_.fetch_add(n);
  {
    MutexLock lock(&mu_);
    if (stop_) return absl::UnavailableError("the server is shutting down");
    inflight_.fetch_add(static_cast<int32_t>(n));
    // One lock: the samples reach the scheduler's queue one after another.
    for (size_t i = 0; i < n; ++i) {
      samples[i].group = n > 1 ? first : 0;
      inbox_.push_back(SubmitCmd{first + i, std::move(samples[i]), std::move(sinks[i])});
    }
  }
  cv_.Signal();
  return first;
}

void EngineLoop::SetFailurePolicy(int32_t max_failed_steps, std::function<void(const absl::Status&)> on_failed) {
  MutexLock lock(&mu_);
  max_failed_steps_ = max_failed_steps;
  on_failed_ = std::move(on_failed);
}

void EngineLoop::SetStepTimeout(absl::Duration timeout) {
  watchdog_ = std::make_unique<StepWatchdog>(timeout, [this, timeout](absl::Duration ran) {
    Break(absl::UnavailableError(absl::StrFormat(
        "an engine step has run for %.1f s, past the step timeout of %.1f s (--step-timeout-s): the engine is hung",
        absl::ToDoubleSeconds(ran), absl::ToDoubleSeconds(timeout))));
  });
}

bool EngineLoop::step_hung() const { return watchdog_->stuck(); }

void EngineLoop::Break(const absl::Status& why) {
  std::function<void(const absl::Status&)> on_failed;
  {
    MutexLock lock(&mu_);
    if (failed_.load()) return;
    failure_ = why;
    failed_.store(true);
    on_failed = on_failed_;
  }
  logging::Error("%s: the engine cannot continue; ending every request", why.message());
  if (on_failed) on_failed(why);
}

absl::Status EngineLoop::failure() const {
  MutexLock lock(&mu_);
  return failure_;
}

void EngineLoop::AfterStep(const StepReport& report) {
  if (report.engine_status.ok()) {
    if (report.ran) failed_steps_ = 0;
    return;
  }
  // The step's requests ended with finish_reason error (each has its own
  // record, with its id); this line says why the step failed.
  logging::Error("engine step failed (%d requests ended with an error): %s", report.finished,
                 report.engine_status.ToString());
  ++failed_steps_;
  {
    MutexLock lock(&mu_);
    if (max_failed_steps_ <= 0 || failed_steps_ < max_failed_steps_) return;
  }
  Break(absl::UnavailableError(absl::StrCat("the engine failed ", failed_steps_,
                                            failed_steps_ == 1 ? " step" : " steps in a row",
                                            " (the last: ", report.engine_status.message(), ")")));
}

void EngineLoop::Cancel(RequestId id) { Post(CancelCmd{id}); }
void EngineLoop::CancelAll() { Post(CancelAllCmd{}); }
void EngineLoop::BeginDrain() { draining_.store(true); }

void EngineLoop::Post(Command c) {
  {
    MutexLock lock(&mu_);
    if (stop_) return;
    inbox_.push_back(std::move(c));
  }
  cv_.Signal();
}

void EngineLoop::Stop() {
  {
    MutexLock lock(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.Signal();
  if (thread_.joinable()) thread_.join();
}

LoopStats EngineLoop::Stats() const {
  MutexLock lock(&mu_);
  LoopStats s = stats_;
  s.broken = failed_.load();
  s.step_running_seconds = absl::ToDoubleSeconds(watchdog_->running());
  s.inflight = inflight_.load();
  s.finished = finished_.load();
  s.rejected = rejected_.load();
  return s;
}

void EngineLoop::Handle(SubmitCmd& c) {
  if (failed_.load()) {  // queued before the engine broke
    const absl::Status s = Accepting();
    if (observer_ != nullptr) observer_->OnRejected(s);
    CountingSink(std::move(c.sink), c.request.request_id, &inflight_, &finished_, &rejected_).OnRejected(s);
    return;
  }
  logging::Request(logging::Level::kDebug, c.request.request_id,
                   "received: prompt_tokens=%d max_tokens=%d kv_policy=%s kv_budget=%d peak_slots=%d",
                   static_cast<int>(c.request.prompt.size()), c.request.options.max_tokens,
                   std::string(c.request.options.kv.policy_name()), c.request.options.kv.budget, c.request.peak_slots);
  auto sink =
      std::make_shared<CountingSink>(std::move(c.sink), c.request.request_id, &inflight_, &finished_, &rejected_);
  const absl::Status s = AddRequest(scheduler_, engine_, c.id, std::move(c.request), sink);
  if (!s.ok()) {
    if (observer_ != nullptr) observer_->OnRejected(s);
    sink->OnRejected(s);
  }
}

void EngineLoop::PublishStats(const StepReport* report) {
  LoopStats s;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  const KvCacheManager& kv = scheduler_.kv();
  s.kv_blocks_total = kv.TotalBlocks();
  s.kv_blocks_free = kv.FreeBlocks();
  s.kv_blocks_reserved = scheduler_.reserved_blocks();
  if (const PrefixCache* pc = kv.prefix_cache(); pc != nullptr) {
    s.prefix_cache = true;
    s.prefix_cache_blocks = pc->num_blocks();
    s.prefix_cache_idle_blocks = kv.IdleBlocks();
  }
  s.compressing = engine_.num_compressing();
  s.kv_cached_tokens = kv.HeldSlots();
  s.kv_logical_tokens = engine_.KvLogicalTokens();
  s.totals = engine_.totals();
  s.totals.prefix_queries = kv.prefix_queries();  // counted at admission (KvCacheManager::Adopt)
  s.totals.prefix_hits = kv.prefix_hits();
  MutexLock lock(&mu_);
  // The last step's size; 0 once the engine is idle.
  const bool ran = report != nullptr && report->ran;
  const bool idle = !scheduler_.HasWork();
  s.last_step_batch = ran ? report->decode_seqs + report->prefill_seqs : idle ? 0 : stats_.last_step_batch;
  s.last_step_tokens = ran ? report->tokens : idle ? 0 : stats_.last_step_tokens;
  stats_ = s;
}

void EngineLoop::Run() {
  std::deque<Command> batch;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (!stop_ && inbox_.empty() && !scheduler_.HasWork()) {
        while (!stop_ && inbox_.empty()) cv_.Wait(&mu_);
      }
      if (stop_) break;
      batch.swap(inbox_);
    }
    for (Command& c : batch) {
      if (auto* s = std::get_if<SubmitCmd>(&c)) {
        Handle(*s);
      } else if (auto* k = std::get_if<CancelCmd>(&c)) {
        scheduler_.Abort(k->id, RequestState::kFinishedCancelled);
      } else {
        scheduler_.AbortAll(RequestState::kFinishedCancelled);
      }
    }
    batch.clear();
    StepReport report;
    if (scheduler_.HasWork()) {
      const SchedClock::time_point t0 = SchedClock::now();
      watchdog_->BeginStep();
      report = scheduler_.Step(t0);
      watchdog_->EndStep();
      if (observer_ != nullptr && report.ran) {
        observer_->OnStep(report, std::chrono::duration<double>(SchedClock::now() - t0).count());
        // The scheduler's record times each token (SeqResult::at).
        for (double seconds : report.ttft_seconds) observer_->OnFirstToken(seconds);
        for (double seconds : report.itl_seconds) observer_->OnInterToken(seconds);
      }
      AfterStep(report);
    }
    // Broken (failed steps, or the watchdog while a step ran too long): what
    // is left ends with the failure, once.
    if (failed_.load() && !aborted_after_failure_) {
      aborted_after_failure_ = true;
      scheduler_.AbortAll(RequestState::kFinishedError);
    }
    PublishStats(&report);
    if (scheduler_.HasWork() && !report.ran) {
      // Waiting requests that cannot be admitted yet and nothing running
      // (optimistic watermark): wait briefly for a cancel or a deadline.
      MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + absl::Milliseconds(5);
      while (!stop_ && inbox_.empty()) {
        if (cv_.WaitWithDeadline(&mu_, until)) break;  // timed out
      }
    }
  }
  // Whatever is left (and still in the inbox) ends as cancelled.
  scheduler_.AbortAll(RequestState::kFinishedCancelled);
  std::deque<Command> rest;
  {
    MutexLock lock(&mu_);
    rest.swap(inbox_);
  }
  for (Command& c : rest) {
    if (auto* s = std::get_if<SubmitCmd>(&c)) {
      const absl::Status st = absl::UnavailableError("the server is shutting down");
      if (observer_ != nullptr) observer_->OnRejected(st);
      CountingSink sink(std::move(s->sink), s->request.request_id, &inflight_, &finished_, &rejected_);
      sink.OnRejected(st);
    }
  }
  PublishStats(nullptr);
}

}  // namespace beacon
