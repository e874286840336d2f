// The load generator's gRPC side: streamed Generate calls on the callback API
// (one ClientReadReactor per request), so thousands of concurrent streams
// need only gRPC's own few threads, spread over a small pool of channels that
// each keep their own TCP connection.
//
// Token arrival times are taken with steady_clock as each message is
// received, on the gRPC thread that delivers it.
#ifndef BEACON_LOADTEST_CLIENT_H_
#define BEACON_LOADTEST_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/stats.h"
#include "loadtest/workload.h"
#include "proto/beacon/v1/beacon.grpc.pb.h"

namespace beacon::loadtest {

using Clock = std::chrono::steady_clock;

struct ClientOptions {
  std::string server = "127.0.0.1:50051";
  int32_t connections = 4;        // channels, each with its own subchannel pool (TCP connection)
  std::string api_key;            // sent as "authorization: Bearer KEY" when set
  std::string tls_ca_pem;         // PEM roots: connect over TLS when set
  double timeout_s = 600;         // per-request gRPC deadline
  double connect_timeout_s = 10;  // for the initial GetModelInfo on every channel
};

// The request as beacon.v1 sends it.
v1::GenerateRequest ToProto(const RequestSpec& spec);

class GenerateCall;

class StreamClient {
 public:
  // Creates the channels and calls GetModelInfo on each (which also opens the
  // connections before any timed request). An unreachable server or a refused
  // call is an error naming the address and the gRPC status.
  static absl::StatusOr<std::unique_ptr<StreamClient>> Connect(const ClientOptions& options);
  // REQUIRES: no call in flight (the runner waits for every call to end).
  ~StreamClient();

  const v1::ModelInfo& model_info() const { return info_; }

  // Called exactly once per Start(), on a gRPC thread, after the stream ended.
  using DoneFn = std::function<void(RequestResult)>;
  // Starts one streamed Generate; never blocks on the network. Latencies are
  // measured from `intended_start`; start_s is its offset from `run_start`.
  // `on_tokens(n)` (optional) is called on each message carrying n tokens.
  void Start(const RequestSpec& spec, bool warmup, Clock::time_point intended_start, Clock::time_point run_start,
             DoneFn done, std::function<void(int)> on_tokens = nullptr);

  // Cancels every call in flight; each still reports through its DoneFn.
  void CancelAll();
  int64_t inflight() const { return inflight_.load(); }

 private:
  friend class GenerateCall;
  StreamClient() = default;
  void Register(GenerateCall* call);
  void Unregister(GenerateCall* call);

  ClientOptions options_;
  std::vector<std::unique_ptr<v1::BeaconService::Stub>> stubs_;
  std::atomic<uint64_t> next_stub_{0};
  std::atomic<int64_t> inflight_{0};
  v1::ModelInfo info_;
  std::mutex mu_;
  std::unordered_set<GenerateCall*> calls_;  // GUARDED_BY(mu_)
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_CLIENT_H_
