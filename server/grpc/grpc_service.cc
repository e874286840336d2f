#include "server/grpc/grpc_service.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/tokenizer/unicode.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/grpc_convert.h"
#include "server/ops/api_key.h"
#include "util/log.h"
#include "util/mutex.h"
#include "util/utf8.h"

namespace beacon {
namespace {

using grpc_internal::GenerateStream;
using v1::GenerateResponse;

// A stream that ends at once with an error status (no messages).
class ErrorStream : public grpc::ServerWriteReactor<GenerateResponse> {
 public:
  explicit ErrorStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

std::string NewRequestId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("beacon-%016x", rng());
}

}  // namespace

BeaconGrpcService::BeaconGrpcService(EngineLoop* loop, const Tokenizer* tokenizer, GrpcServiceOptions options)
    : loop_(loop),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      prep_(std::make_unique<PrepPool>(std::max(1, options_.prepare_threads),
                                       static_cast<size_t>(std::max(1, options_.prepare_queue)))) {}

BeaconGrpcService::~BeaconGrpcService() = default;

std::string_view BeaconGrpcService::Authorization(const grpc::CallbackServerContext* context) {
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  return it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
}

grpc::Status BeaconGrpcService::Authorize(const grpc::CallbackServerContext* context) const {
  if (options_.door.api_keys.Allows(Authorization(context))) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong API key: send metadata 'authorization: Bearer <key>'");
}

grpc::ServerWriteReactor<GenerateResponse>* BeaconGrpcService::Generate(grpc::CallbackServerContext* context,
                                                                        const v1::GenerateRequest* request) {
  if (grpc::Status auth = Authorize(context); !auth.ok()) {
    options_.door.Refused(absl::UnauthenticatedError(auth.error_message()), Excerpt(request->request_id(), 64));
    return new ErrorStream(auth);
  }
  // The stream answers now; the request is rendered and tokenized on the
  // PrepPool (grpc/prep_pool.h). Its sample count is the request's n when
  // valid; an invalid n is refused by PrepareRequest there, on a stream of 1.
  const int64_t n = request->sampling().n() == 0 ? 1 : request->sampling().n();
  const int32_t samples = n >= 1 && n <= options_.door.limits.max_n ? static_cast<int32_t>(n) : 1;
  auto* stream = new GenerateStream(loop_, samples);
  const SchedClock::time_point arrival = SchedClock::now();
  const bool queued = prep_->TrySubmit([this, context, request, stream, samples, arrival] {
    ServeRequest r = FromProto(*request);
    r.arrival = arrival;
    r.deadline = SteadyDeadline(context->deadline());
    if (r.request_id.empty()) r.request_id = NewRequestId();
    if (context->IsCancelled()) {  // gone while queued: nothing to prepare
      stream->Start(r.request_id, absl::CancelledError("cancelled"), nullptr);
      return;
    }
    absl::StatusOr<PreparedRequest> prepared = options_.door.Prepare(r, Authorization(context), *tokenizer_);
    if (prepared.ok() && prepared->samples != samples) {
      prepared = absl::InternalError(absl::StrCat("n: prepared ", prepared->samples, " samples, not ", samples));
      options_.door.Refused(prepared.status(), r.request_id);
    }
    stream->Start(r.request_id, std::move(prepared), options_.door.on_rejected);
  });
  if (!queued) {
    const absl::Status busy = Busy();
    const std::string id =
        request->request_id().empty() ? NewRequestId() : std::string(Excerpt(request->request_id(), 64));
    options_.door.Refused(busy, id);
    stream->Start(id, busy, nullptr);
  }
  return stream;
}

absl::Status BeaconGrpcService::Busy() const {
  return absl::ResourceExhaustedError(absl::StrCat("the server is busy: ", prep_->max_queued(),
                                                   " requests already wait to be tokenized (--grpc-prepare-queue); "
                                                   "retry later"));
}

grpc::ServerUnaryReactor* BeaconGrpcService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authorize(context); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  // On the PrepPool: the request and response live until Finish.
  if (!prep_->TrySubmit([this, reactor, request, response] {
        absl::StatusOr<std::vector<int32_t>> ids =
            TokenizeInput(FromProto(*request), *tokenizer_, options_.door.limits);
        if (!ids.ok()) {
          reactor->Finish(ToGrpc(ids.status()));
          return;
        }
        for (int32_t id : *ids) {
          response->add_ids(id);
          response->add_pieces(SanitizeUtf8(tokenizer_->TokenBytes(id, /*render_special=*/true)));
        }
        reactor->Finish(grpc::Status::OK);
      })) {
    reactor->Finish(ToGrpc(Busy()));
  }
  return reactor;
}

grpc::ServerUnaryReactor* BeaconGrpcService::Detokenize(grpc::CallbackServerContext* context,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authorize(context); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  if (!prep_->TrySubmit([this, reactor, request, response] {
        const std::span<const int32_t> ids(request->ids().data(), static_cast<size_t>(request->ids().size()));
        const bool skip = !request->has_skip_special_tokens() || request->skip_special_tokens();
        absl::StatusOr<std::string> text = DetokenizeIds(ids, *tokenizer_, skip, "ids", options_.door.limits);
        if (!text.ok()) {
          reactor->Finish(ToGrpc(text.status()));
          return;
        }
        response->set_text(*std::move(text));
        reactor->Finish(grpc::Status::OK);
      })) {
    reactor->Finish(ToGrpc(Busy()));
  }
  return reactor;
}

grpc::ServerUnaryReactor* BeaconGrpcService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest* request,
                                                          v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status auth = Authorize(context);
  if (auth.ok()) *response = options_.model_info;
  reactor->Finish(auth);
  return reactor;
}

}  // namespace beacon
