// The RequestSinks of an OpenAI-API request: one per sample (n of them),
// all handing the engine thread's events (tokens with their logprobs, the
// prompt's logprobs, the final record, a refusal), tagged with the sample's
// index, to one queue the HTTP handler thread waits on. Pushing never
// blocks the engine thread.
#ifndef BEACON_SERVER_OPENAI_COMPLETION_SINK_H_
#define BEACON_SERVER_OPENAI_COMPLETION_SINK_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/serving/request_sink.h"
#include "util/mutex.h"

namespace beacon {

struct CompletionEvent {
  enum Kind { kTokens, kPrompt, kFinal, kRejected, kWake } kind = kWake;
  int32_t index = 0;  // the sample's
  std::string text;
  TextPart part = TextPart::kAnswer;
  std::vector<int32_t> ids;  // kTokens: the tokens; kPrompt: the prompt
  std::vector<PositionLogprobs> logprobs;
  StreamFinal final;
  absl::Status status;
};

class CompletionQueue {
 public:
  void Push(CompletionEvent e) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      events_.push_back(std::move(e));
    }
    cv_.Signal();
  }
  // A kWake event: unblocks Next() (the client went away).
  void Wake() { Push(CompletionEvent{}); }
  // Blocks until an event arrives.
  CompletionEvent Next() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    while (events_.empty()) cv_.Wait(&mu_);
    CompletionEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  Mutex mu_;
  CondVar cv_;  // signalled (outside mu_) for each event pushed
  std::deque<CompletionEvent> events_ ABSL_GUARDED_BY(mu_);
};

class CompletionSink : public RequestSink {
 public:
  CompletionSink(std::shared_ptr<CompletionQueue> queue, int32_t index) : queue_(std::move(queue)), index_(index) {}

  void OnTokens(std::span<const int32_t> ids, std::string_view text, TextPart part,
                std::span<const PositionLogprobs> logprobs) override {
    CompletionEvent e = Make(CompletionEvent::kTokens);
    e.text = std::string(text);
    e.part = part;
    e.ids.assign(ids.begin(), ids.end());
    e.logprobs.assign(logprobs.begin(), logprobs.end());
    queue_->Push(std::move(e));
  }
  void OnPromptLogprobs(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs) override {
    CompletionEvent e = Make(CompletionEvent::kPrompt);
    e.ids.assign(prompt.begin(), prompt.end());
    e.logprobs.assign(logprobs.begin(), logprobs.end());
    queue_->Push(std::move(e));
  }
  void OnFinish(const StreamFinal& f) override {
    CompletionEvent e = Make(CompletionEvent::kFinal);
    e.final = f;
    queue_->Push(std::move(e));
  }
  void OnRejected(const absl::Status& s) override {
    CompletionEvent e = Make(CompletionEvent::kRejected);
    e.status = s;
    queue_->Push(std::move(e));
  }

 private:
  CompletionEvent Make(CompletionEvent::Kind kind) const {
    CompletionEvent e;
    e.kind = kind;
    e.index = index_;
    return e;
  }
  std::shared_ptr<CompletionQueue> queue_;
  int32_t index_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_COMPLETION_SINK_H_
