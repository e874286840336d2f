// Conversions between beacon.v1 messages and the server's protocol-neutral
// types (serve_request.h, request_sink.h), and absl::Status to grpc::Status.
#ifndef BEACON_SERVER_GRPC_GRPC_CONVERT_H_
#define BEACON_SERVER_GRPC_GRPC_CONVERT_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "engine/serving/request_sink.h"
#include "engine/serving/serve_request.h"
#include "proto/beacon/v1/beacon.pb.h"

namespace beacon {

// Fills the request's fields; the deadline and arrival are the caller's.
ServeRequest FromProto(const v1::GenerateRequest& request);
// Text or chat input of a Tokenize call, as a ServeRequest.
ServeRequest FromProto(const v1::TokenizeRequest& request);

// The wire's FinishReason: FINISH_REASON_<FinishReasonName in upper case>
// (engine/finish_reason.h), so the gRPC enum and our names cannot drift;
// kNone, never in a final record, is UNSPECIFIED.
v1::FinishReason ToProto(FinishReason reason);
// One position's log probabilities.
void ToProto(const PositionLogprobs& logprobs, v1::TokenLogprob* out);
// The last message of a stream: finish reason, usage, timings, KV stats.
void FillFinal(const StreamFinal& final, v1::GenerateResponse* out);

// absl::Status to grpc::Status, with google.rpc rich details in the
// grpc-status-details-bin trailer (what grpcio-status and grpc-java's
// StatusProto read): INVALID_ARGUMENT whose message names a field
// ("messages[0].role: ...", FieldOf) carries a BadRequest field violation
// for it; RESOURCE_EXHAUSTED (queue full) and UNAVAILABLE (draining) carry
// RetryInfo with a delay of kRetryDelaySeconds.
inline constexpr int kRetryDelaySeconds = 1;
grpc::Status ToGrpc(const absl::Status& status);

// The gRPC deadline as a steady-clock time point (max() when none).
SchedClock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline);

}  // namespace beacon

#endif  // BEACON_SERVER_GRPC_GRPC_CONVERT_H_
