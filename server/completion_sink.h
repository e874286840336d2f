// The RequestSink of an OpenAI-API request: hands the engine thread's events
// (tokens with their logprobs, the prompt's logprobs, the final record, a
// refusal) to the HTTP handler thread, which waits on Next(). Pushing never
// blocks the engine thread.
#ifndef BEACON_SERVER_COMPLETION_SINK_H_
#define BEACON_SERVER_COMPLETION_SINK_H_

#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "server/request_sink.h"
#include "util/mutex.h"

namespace beacon {

class CompletionSink : public RequestSink {
 public:
  struct Event {
    enum Kind { kTokens, kPrompt, kFinal, kRejected, kWake } kind = kWake;
    std::string text;
    TextPart part = TextPart::kAnswer;
    std::vector<int32_t> ids;  // kTokens: the tokens; kPrompt: the prompt
    std::vector<PositionLogprobs> logprobs;
    StreamFinal final;
    absl::Status status;
  };

  void OnTokens(std::span<const int32_t> ids, std::string_view text, TextPart part,
                std::span<const PositionLogprobs> logprobs) override {
    Event e;
    e.kind = Event::kTokens;
    e.text = std::string(text);
    e.part = part;
    e.ids.assign(ids.begin(), ids.end());
    e.logprobs.assign(logprobs.begin(), logprobs.end());
    Push(std::move(e));
  }
  void OnPromptLogprobs(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs) override {
    Event e;
    e.kind = Event::kPrompt;
    e.ids.assign(prompt.begin(), prompt.end());
    e.logprobs.assign(logprobs.begin(), logprobs.end());
    Push(std::move(e));
  }
  void OnFinish(const StreamFinal& f) override {
    Event e;
    e.kind = Event::kFinal;
    e.final = f;
    Push(std::move(e));
  }
  void OnRejected(const absl::Status& s) override {
    Event e;
    e.kind = Event::kRejected;
    e.status = s;
    Push(std::move(e));
  }
  void Wake() { Push(Event{}); }

  // Blocks until an event arrives.
  Event Next() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    while (events_.empty()) cv_.Wait(&mu_);
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  void Push(Event e) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      events_.push_back(std::move(e));
    }
    cv_.Signal();
  }
  Mutex mu_;
  CondVar cv_;  // signalled (outside mu_) for each event pushed
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace beacon

#endif  // BEACON_SERVER_COMPLETION_SINK_H_
