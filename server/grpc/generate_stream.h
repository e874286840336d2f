// One gRPC Generate stream (server/grpc/grpc_service.h): the write reactor,
// and the RequestSink of each of its samples that the engine thread calls.
// Included by grpc_service.cc only.
#ifndef BEACON_SERVER_GRPC_GENERATE_STREAM_H_
#define BEACON_SERVER_GRPC_GENERATE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "engine/serving/engine_loop.h"
#include "engine/serving/serve_request.h"
#include "engine/tools/tool_parser.h"
#include "proto/beacon/v1/beacon.grpc.pb.h"
#include "server/grpc/grpc_convert.h"
#include "util/log.h"
#include "util/mutex.h"

namespace beacon::grpc_internal {

using v1::GenerateResponse;

// The state one Generate stream shares between the gRPC side (the reactor)
// and the engine side (a RequestSink per sample it implements). Every gRPC
// operation (StartWrite, Finish) is decided under `mu_` but issued outside
// it, so a reaction that gRPC runs inline can never deadlock on it.
//
// With n samples, each sample's tokens merge into its own pending message
// (index set), messages of different samples are written in turn, and the
// stream ends with the last sample's final message.
class GenerateStream : public grpc::ServerWriteReactor<GenerateResponse> {
 public:
  // The engine-facing half of one sample; outlives the reactor if the engine
  // still holds it. Its mutex is recursive: a write issued under it may
  // complete inline and run OnDone (which detaches) on the same thread.
  // Every path issues its gRPC operation last and touches nothing of the
  // stream afterwards.
  class Sink : public RequestSink {
   public:
    Sink(GenerateStream* stream, int32_t index) : stream_(stream), index_(index) {}
    void OnTokens(std::span<const int32_t> ids, std::string_view text, TextPart part,
                  std::span<const PositionLogprobs> logprobs) override {
      RecursiveLock lock(&mu_);
      if (stream_ != nullptr) stream_->PushTokens(index_, ids, text, part, logprobs);
    }
    void OnPromptLogprobs(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs) override {
      RecursiveLock lock(&mu_);
      if (stream_ != nullptr) stream_->PushPromptLogprobs(index_, prompt, logprobs);
    }
    void OnFinish(const StreamFinal& f) override {
      RecursiveLock lock(&mu_);
      if (stream_ != nullptr) stream_->PushFinal(index_, f);
    }
    void OnRejected(const absl::Status& s) override {
      RecursiveLock lock(&mu_);
      if (stream_ != nullptr) stream_->PushReject(s);
    }
    void Detach() {
      RecursiveLock lock(&mu_);
      stream_ = nullptr;
    }

   private:
    RecursiveMutex mu_;                            // re-entered at run time: util/mutex.h
    GenerateStream* stream_ ABSL_GUARDED_BY(mu_);  // null once the reactor is done
    const int32_t index_;
  };

  // Nothing is written, and the stream does not finish, until Start(): the
  // request is prepared on the PrepPool meanwhile, and a cancel that comes
  // first is answered then.
  GenerateStream(EngineLoop* loop, int32_t samples)
      : loop_(loop), n_(samples), pending_(samples), has_pending_(samples), final_pending_(samples), calls_(samples) {
    for (int32_t i = 0; i < samples; ++i) sinks_.push_back(std::make_shared<Sink>(this, i));
  }

  // Submits the prepared request, or ends the stream with `request`'s error
  // (or CANCELLED when the client left during the preparation).
  // `on_rejected` hears a synchronous refusal (draining). REQUIRES: a
  // prepared request has the stream's number of samples.
  void Start(std::string request_id, absl::StatusOr<PreparedRequest> request,
             const std::function<void(const absl::Status&)>& on_rejected) ABSL_LOCKS_EXCLUDED(mu_) {
    bool cancelled;
    const std::string log_id = request_id;
    {
      MutexLock lock(&mu_);
      request_id_ = std::move(request_id);
      started_ = true;
      cancelled = cancelled_;
      if (!request.ok()) reject_ = ToGrpc(request.status());
      // Tools offered: each sample's answer goes through a call parser.
      if (request.ok() && request->tool_format.has_value()) {
        for (auto& c : calls_) c.emplace(*request->tool_format, request->tool_names);
      }
    }
    if (cancelled || !request.ok()) {
      Action a;
      {
        MutexLock lock(&mu_);
        a = Next();
      }
      Act(a);  // last: OnDone may run inline and delete this
      return;
    }
    std::vector<std::shared_ptr<RequestSink>> sinks(sinks_.begin(), sinks_.end());
    absl::StatusOr<RequestId> id = loop_->SubmitGroup(ExpandSamples(*request), std::move(sinks));
    if (!id.ok()) {
      if (on_rejected) on_rejected(id.status());
      logging::Request(logging::Level::kInfo, log_id, "refused: %s", id.status().ToString());
    }
    Action a;
    bool refused_already = false;
    {
      MutexLock lock(&mu_);
      if (!id.ok()) {
        reject_ = ToGrpc(id.status());
      } else {
        first_id_ = *id;
        // A sample refused before the id was known here (the engine thread
        // is quick): the others were queued and must go too.
        refused_already = reject_.has_value();
      }
      a = Next();
    }
    if (refused_already && n_ > 1) CancelInEngine();
    Act(a);  // last: OnDone may run inline and delete this
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    Action a;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) cancelled_ = true;  // the client is gone
      a = Next();
    }
    if (!ok) CancelInEngine();
    Act(a);
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    Action a;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      a = Next();
    }
    CancelInEngine();
    Act(a);
  }

  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    for (const std::shared_ptr<Sink>& s : sinks_) s->Detach();
    delete this;
  }

 private:
  struct Action {
    enum { kNone, kWrite, kWriteLast, kFinish } kind = kNone;
    grpc::Status status;
  };

  // Engine thread, via a Sink (whose lock keeps `this` alive).
  // Tokens that arrive while a write is in flight are merged into the
  // sample's next message, each part's text into its own field.
  void PushTokens(int32_t i, std::span<const int32_t> ids, std::string_view text, TextPart part,
                  std::span<const PositionLogprobs> logprobs) ABSL_LOCKS_EXCLUDED(mu_) {
    Action a;
    {
      MutexLock lock(&mu_);
      GenerateResponse& m = pending_[i];
      for (int32_t id : ids) m.add_token_ids(id);
      for (const PositionLogprobs& lp : logprobs) ToProto(lp, m.add_logprobs());
      if (part == TextPart::kAnswer && calls_[i].has_value()) {
        AddAnswer(calls_[i]->Push(text), &m);
      } else {
        std::string* field = part == TextPart::kReasoning ? m.mutable_reasoning_text() : m.mutable_text();
        field->append(text.data(), text.size());
      }
      has_pending_[i] = true;
      a = Next();
    }
    Act(a);
  }
  // Before any token: it rides in the sample's first message.
  void PushPromptLogprobs(int32_t i, std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    for (int32_t id : prompt) pending_[i].add_prompt_token_ids(id);
    for (const PositionLogprobs& lp : logprobs) ToProto(lp, pending_[i].add_prompt_logprobs());
    has_pending_[i] = true;  // written with the first token's message, which follows at once
  }
  void PushFinal(int32_t i, const StreamFinal& f) ABSL_LOCKS_EXCLUDED(mu_) {
    Action a;
    {
      MutexLock lock(&mu_);
      if (calls_[i].has_value()) AddAnswer(calls_[i]->Finish(), &pending_[i]);  // what the parser held
      FillFinal(f, &pending_[i]);
      // A failure inside the engine ends the stream with a non-OK status as
      // well as the final message, for clients that check only the status.
      if (f.reason == FinishReason::kError && final_status_.ok()) {
        final_status_ = grpc::Status(grpc::StatusCode::INTERNAL, "generation failed: " + f.error);
      }
      has_pending_[i] = true;
      final_pending_[i] = true;
      a = Next();
    }
    Act(a);
  }
  void PushReject(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_) {
    Action a;
    {
      MutexLock lock(&mu_);
      reject_ = ToGrpc(s);
      a = Next();
    }
    if (n_ > 1) CancelInEngine();  // the samples that were queued
    Act(a);
  }

  // An answer piece through the call parser: its text, and its whole calls.
  static void AddAnswer(const ParsedAnswer& p, GenerateResponse* m) {
    m->mutable_text()->append(p.content);
    for (const ParsedToolCall& c : p.calls) {
      v1::ToolCall* t = m->add_tool_calls();
      t->set_id(NewToolCallId());
      t->set_name(c.name);
      t->set_arguments(c.arguments);
    }
  }

  // Decides the next gRPC operation.
  Action Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Action a;
    if (!started_ || finish_called_ || writing_) return a;
    if (cancelled_) {
      finish_called_ = true;
      a.kind = Action::kFinish;
      a.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      return a;
    }
    if (reject_.has_value()) {
      finish_called_ = true;
      a.kind = Action::kFinish;
      a.status = *reject_;
      return a;
    }
    // The samples in turn, from the one after the last written.
    int32_t i = -1;
    for (int32_t k = 1; k <= n_ && i < 0; ++k) {
      const int32_t c = (last_written_ + k) % n_;
      if (has_pending_[c]) i = c;
    }
    if (i < 0) return a;
    in_flight_ = std::move(pending_[i]);
    pending_[i].Clear();
    has_pending_[i] = false;
    last_written_ = i;
    in_flight_.set_request_id(request_id_);
    if (n_ > 1) in_flight_.set_index(i);
    if (final_pending_[i]) {
      final_pending_[i] = false;
      ++finals_written_;
    }
    if (finals_written_ == n_) {
      finish_called_ = true;
      a.kind = Action::kWriteLast;
      a.status = final_status_;
    } else {
      writing_ = true;
      a.kind = Action::kWrite;
    }
    return a;
  }

  // Issues the operation; never under mu_.
  void Act(const Action& a) ABSL_LOCKS_EXCLUDED(mu_) {
    switch (a.kind) {
      case Action::kNone: break;
      case Action::kWrite: StartWrite(&in_flight_); break;
      case Action::kWriteLast: StartWriteAndFinish(&in_flight_, grpc::WriteOptions(), a.status); break;
      case Action::kFinish: Finish(a.status); break;
    }
  }

  void CancelInEngine() ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<RequestId> id;
    {
      MutexLock lock(&mu_);
      id = first_id_;
    }
    if (!id.has_value()) return;
    for (int32_t i = 0; i < n_; ++i) loop_->Cancel(*id + i);
  }

  EngineLoop* loop_;
  std::string request_id_ ABSL_GUARDED_BY(mu_);  // set by Start()
  const int32_t n_;                              // samples
  std::vector<std::shared_ptr<Sink>> sinks_;

  Mutex mu_;
  std::optional<RequestId> first_id_ ABSL_GUARDED_BY(mu_);
  // Per sample: tokens not yet written (merged while a write is in flight),
  // whether there are any, and whether its final record is among them.
  std::vector<GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> has_pending_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> final_pending_ ABSL_GUARDED_BY(mu_);
  // Per sample, with tools offered: the answer's call parser (Start).
  std::vector<std::optional<ToolCallStream>> calls_ ABSL_GUARDED_BY(mu_);
  int32_t last_written_ ABSL_GUARDED_BY(mu_) = -1;
  int32_t finals_written_ ABSL_GUARDED_BY(mu_) = 0;
  // The message being written. Not GUARDED_BY(mu_): gRPC reads it, without
  // mu_, while the write runs; Next() rewrites it under mu_ only once no
  // write is in flight (writing_ false, Finish not yet decided).
  GenerateResponse in_flight_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // Start() has run: the stream may finish
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> reject_ ABSL_GUARDED_BY(mu_);
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);  // OK unless the engine failed a sample
};

}  // namespace beacon::grpc_internal

#endif  // BEACON_SERVER_GRPC_GENERATE_STREAM_H_
