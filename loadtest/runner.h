// Drives one load run: issues requests from a Workload through a StreamClient,
// open loop (arrivals at a rate, whatever the server's progress) or closed
// loop (a fixed number in flight, the next starting when one finishes),
// for a request count or a duration, after optional warm-up requests.
//
// One control thread (the caller's) issues every request and collects every
// result; gRPC threads only hand finished results over. The run ends when
// everything issued has finished: a duration bounds the issuing, not the
// waiting (each request's gRPC deadline bounds that).
#ifndef BEACON_LOADTEST_RUNNER_H_
#define BEACON_LOADTEST_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadtest/client.h"
#include "loadtest/stats.h"
#include "loadtest/workload.h"

namespace beacon::loadtest {

struct LoadOptions {
  double rate = 0;                          // > 0: open loop at this many requests/s (+inf: all at once)
  double burstiness = 1;                    // open loop: gamma shape of the gaps (1 = Poisson)
  int32_t concurrency = 0;                  // > 0: closed loop, this many requests in flight
  int64_t requests = 0;                     // > 0: run this many measured requests
  double duration_s = 0;                    // > 0: instead, issue measured requests for this long
  int64_t warmup = 0;                       // requests run before the measured ones, excluded from the figures
  uint64_t seed = 0;                        // seeds the arrival gaps
  bool progress = true;                     // a progress line on stderr, about once a second
  std::string label;                        // prefix of the progress line (a sweep level)
  const std::atomic<bool>* stop = nullptr;  // when it turns true: stop issuing, cancel what is in flight
};

// OK when exactly one of rate / concurrency and exactly one of requests /
// duration_s is set, with valid values; else INVALID_ARGUMENT naming the flags.
absl::Status ValidateLoad(const LoadOptions& options);

struct RunOutput {
  std::vector<RequestResult> results;  // in completion order
  double wall_s = 0;
  bool interrupted = false;  // `stop` fired
};

// REQUIRES: ValidateLoad(options).ok(). Blocks until every issued request
// has finished.
RunOutput RunLoad(StreamClient* client, Workload* workload, const LoadOptions& options);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_RUNNER_H_
