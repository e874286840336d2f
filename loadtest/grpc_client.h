// The gRPC backend of the load generator: streamed beacon.v1 Generate calls
// on the callback API (one ClientReadReactor per request), so thousands of
// concurrent streams need only gRPC's own few threads, spread over a small
// pool of channels that each keep their own TCP connection.
#ifndef BEACON_LOADTEST_GRPC_CLIENT_H_
#define BEACON_LOADTEST_GRPC_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/client.h"
#include "proto/beacon/v1/beacon.grpc.pb.h"

namespace beacon::loadtest {

// The request as beacon.v1 sends it.
v1::GenerateRequest ToProto(const RequestSpec& spec);

class GenerateCall;

class GrpcStreamClient final : public StreamClient {
 public:
  // Creates the channels and calls GetModelInfo on each (which also opens the
  // connections before any timed request). An unreachable server or a refused
  // call is an error naming the address and the gRPC status.
  static absl::StatusOr<std::unique_ptr<GrpcStreamClient>> Connect(const ClientOptions& options);
  ~GrpcStreamClient() override;

  void Start(const RequestSpec& spec, bool warmup, Clock::time_point intended_start, Clock::time_point run_start,
             DoneFn done, std::function<void(int)> on_tokens = nullptr) override;
  void CancelAll() override;
  // The Tokenize RPC's id count.
  absl::StatusOr<int32_t> CountTokens(const std::string& text) override;

 private:
  friend class GenerateCall;
  GrpcStreamClient() = default;
  void Register(GenerateCall* call);
  void Unregister(GenerateCall* call);

  std::vector<std::unique_ptr<v1::BeaconService::Stub>> stubs_;
  std::atomic<uint64_t> next_stub_{0};
  std::atomic<int64_t> inflight_{0};
  std::mutex mu_;
  std::unordered_set<GenerateCall*> calls_;  // GUARDED_BY(mu_)
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_GRPC_CLIENT_H_
