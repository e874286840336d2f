// beacon.v1.BeaconService on the gRPC callback API.
//
// Generate: validates and tokenises on the PrepPool (off gRPC's callback
// threads, bounded: RESOURCE_EXHAUSTED when its queue is full; Tokenize and
// Detokenize too), submits to the EngineLoop, and streams with one write
// reactor per call. The engine thread
// never blocks on a client: tokens that arrive while a write is in flight
// are merged into the next message, so a slow reader gets fewer, larger
// messages instead of stalling the batch. A client that cancels, disconnects
// or passes its deadline has its request cancelled in the engine, which
// frees its KV blocks before the next step.
//
// Thread ownership: gRPC threads; the engine loop calls the per-stream sink.
#ifndef BEACON_SERVER_GRPC_GRPC_SERVICE_H_
#define BEACON_SERVER_GRPC_GRPC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/serving/engine_loop.h"
#include "engine/serving/serve_request.h"
#include "proto/beacon/v1/beacon.grpc.pb.h"
#include "server/grpc/prep_pool.h"
#include "server/ops/api_key.h"
#include "server/ops/front_door.h"

namespace beacon {

struct GrpcServiceOptions {
  // Limits, API keys (when set, every call must carry `authorization:
  // Bearer <key>` with one of them), tenants and the refusals' counter,
  // shared with the OpenAI routes (server/ops/front_door.h).
  FrontDoor door;
  v1::ModelInfo model_info;
  // The PrepPool (grpc/prep_pool.h): threads that render and tokenize, and
  // calls that may wait for them (--grpc-prepare-threads, --grpc-prepare-queue).
  int prepare_threads = 4;
  int prepare_queue = 256;
};

class BeaconGrpcService final : public v1::BeaconService::CallbackService {
 public:
  // `loop` and `tokenizer` must outlive the service.
  BeaconGrpcService(EngineLoop* loop, const Tokenizer* tokenizer, GrpcServiceOptions options);
  // Runs the calls still queued on the PrepPool, then joins it (gRPC's
  // Shutdown waits for those calls anyway).
  ~BeaconGrpcService() override;

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context, const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context, const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  // UNAUTHENTICATED unless the call carries the API key (or none is set).
  grpc::Status Authorize(const grpc::CallbackServerContext* context) const;
  // The call's `authorization` metadata, empty when absent.
  static std::string_view Authorization(const grpc::CallbackServerContext* context);
  // RESOURCE_EXHAUSTED: the PrepPool's queue is full.
  absl::Status Busy() const;

  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  GrpcServiceOptions options_;
  std::unique_ptr<PrepPool> prep_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_GRPC_GRPC_SERVICE_H_
