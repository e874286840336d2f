#include "server/engine_loop.h"

#include <chrono>
#include <cstdio>

namespace beacon {
namespace {

// Counts a request out of the in-flight total when it reaches its end,
// whichever way it ends.
class CountingSink : public RequestSink {
 public:
  CountingSink(std::shared_ptr<RequestSink> inner, std::atomic<int32_t>* inflight, std::atomic<int64_t>* finished,
               std::atomic<int64_t>* rejected)
      : inner_(std::move(inner)), inflight_(inflight), finished_(finished), rejected_(rejected) {}
  void OnTokens(std::span<const int32_t> ids, std::string_view text) override { inner_->OnTokens(ids, text); }
  void OnFinish(const StreamFinal& f) override {
    ++*finished_;
    inflight_->fetch_sub(1);
    inner_->OnFinish(f);
  }
  void OnRejected(const absl::Status& s) override {
    ++*rejected_;
    inflight_->fetch_sub(1);
    inner_->OnRejected(s);
  }

 private:
  std::shared_ptr<RequestSink> inner_;
  std::atomic<int32_t>* inflight_;
  std::atomic<int64_t>* finished_;
  std::atomic<int64_t>* rejected_;
};

}  // namespace

EngineLoop::EngineLoop(Backend* backend, KvCache* cache, const Tokenizer* tokenizer, const ModelConfig& config,
                       const SchedulerConfig& scheduler_config, EngineObserver* observer)
    : engine_(backend, cache, tokenizer, config), scheduler_(scheduler_config, &engine_), observer_(observer) {
  engine_.set_observer(observer);
  PublishStats(nullptr);
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() { Stop(); }

absl::StatusOr<RequestId> EngineLoop::Submit(PreparedRequest request, std::shared_ptr<RequestSink> sink) {
  if (draining_.load()) return absl::UnavailableError("the server is draining: send the request to another replica");
  const RequestId id = next_id_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return absl::UnavailableError("the server is shutting down");
    inflight_.fetch_add(1);
    inbox_.push_back(SubmitCmd{id, std::move(request), std::move(sink)});
  }
  cv_.notify_one();
  return id;
}

void EngineLoop::Cancel(RequestId id) { Post(CancelCmd{id}); }
void EngineLoop::CancelAll() { Post(CancelAllCmd{}); }
void EngineLoop::BeginDrain() { draining_.store(true); }

void EngineLoop::Post(Command c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    inbox_.push_back(std::move(c));
  }
  cv_.notify_one();
}

void EngineLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

LoopStats EngineLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  LoopStats s = stats_;
  s.inflight = inflight_.load();
  s.finished = finished_.load();
  s.rejected = rejected_.load();
  return s;
}

void EngineLoop::Handle(SubmitCmd& c) {
  SchedRequest r;
  r.id = c.id;
  r.prompt_tokens = static_cast<int32_t>(c.request.prompt.size());
  r.max_new_tokens = c.request.options.max_tokens;
  r.peak_slots = c.request.peak_slots;
  r.arrival = c.request.arrival;
  r.deadline = c.request.deadline;
  auto sink = std::make_shared<CountingSink>(std::move(c.sink), &inflight_, &finished_, &rejected_);
  absl::Status s = engine_.Add(c.id, std::move(c.request), sink);
  if (s.ok()) {
    s = scheduler_.Add(r);
    if (!s.ok()) engine_.Forget(c.id);
  }
  if (!s.ok()) {
    if (observer_ != nullptr) observer_->OnRejected(s);
    sink->OnRejected(s);
  }
}

void EngineLoop::PublishStats(const StepReport* report) {
  LoopStats s;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  s.kv_blocks_total = engine_.TotalBlocks();
  s.kv_blocks_free = engine_.FreeBlocks();
  s.kv_blocks_reserved = scheduler_.reserved_blocks();
  s.compressing = engine_.num_compressing();
  engine_.KvTokens(&s.kv_cached_tokens, &s.kv_logical_tokens);
  s.totals = engine_.totals();
  std::lock_guard<std::mutex> lock(mu_);
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
      std::unique_lock<std::mutex> lock(mu_);
      if (!stop_ && inbox_.empty() && !scheduler_.HasWork()) {
        cv_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
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
      report = scheduler_.Step(t0);
      if (observer_ != nullptr && report.ran) {
        observer_->OnStep(report, std::chrono::duration<double>(SchedClock::now() - t0).count());
      }
      if (!report.engine_status.ok()) {
        // The step's requests ended with finish_reason error; say why here too.
        std::fprintf(stderr, "beacon-serve: engine step failed (%d requests ended with an error): %s\n",
                     report.finished, std::string(report.engine_status.message()).c_str());
      }
    }
    PublishStats(&report);
    if (scheduler_.HasWork() && !report.ran) {
      // Waiting requests that cannot be admitted yet and nothing running
      // (optimistic watermark): wait briefly for a cancel or a deadline.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return stop_ || !inbox_.empty(); });
    }
  }
  // Whatever is left (and still in the inbox) ends as cancelled.
  scheduler_.AbortAll(RequestState::kFinishedCancelled);
  std::deque<Command> rest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rest.swap(inbox_);
  }
  for (Command& c : rest) {
    if (auto* s = std::get_if<SubmitCmd>(&c)) {
      const absl::Status st = absl::UnavailableError("the server is shutting down");
      if (observer_ != nullptr) observer_->OnRejected(st);
      CountingSink sink(std::move(s->sink), &inflight_, &finished_, &rejected_);
      sink.OnRejected(st);
    }
  }
  PublishStats(nullptr);
}

}  // namespace beacon
