// The planner's synthetic traffic: length distributions (the beacon-loadtest
// syntax), arrivals in virtual time, and the requests they produce.
//
// Length distributions, in tokens, with beacon-loadtest's syntax and meaning
// (one implementation, workload/length_dist.h; a draw is rounded and clamped
// to >= 1; a bare integer N means fixed:N):
//   fixed:N          always N
//   uniform:A:B      integers in [A, B]
//   normal:M:S       mean M, standard deviation S
//   lognormal:M:S    lognormal whose *lengths* have mean M and standard
//                    deviation S (mu, sigma derived), a long right tail
// Arrivals:
//   Poisson at `rate` requests/s (open loop: what a replica behind a load
//   balancer sees), or a closed loop of `concurrency` clients that each send
//   the next request when the previous one ends.
// Draws are deterministic in `seed`; lengths and the unit-rate arrival gaps
// come from separate streams, so runs at different rates see the same
// requests at proportionally scaled times (common random numbers: the SLO
// search compares like with like).
#ifndef BEACON_PLANNER_WORKLOAD_H_
#define BEACON_PLANNER_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "workload/length_dist.h"

namespace beacon::planner {

// Length distributions: workload/length_dist.h (LengthDist::Parse errors
// start with the field name).
using workload::LengthDist;

enum class ArrivalKind { kPoisson, kClosedLoop };

struct WorkloadSpec {
  ArrivalKind arrival = ArrivalKind::kClosedLoop;
  double rate = 0;           // requests/s, Poisson
  int32_t concurrency = 16;  // clients, closed loop
  int32_t num_requests = 64;
  LengthDist prompt, output;
  // The requests' max_tokens: 0 = each request's drawn output length (it runs
  // to length, like ignore_eos); otherwise outputs shorter than this stop
  // early (EOS) and reserve-mode admission still sets aside max_tokens.
  int32_t max_tokens = 0;
  uint64_t seed = 1;
  // A shared prefix (a system prompt, few-shot examples): a `share_ratio`
  // fraction of the requests start with the same `shared_prefix` tokens,
  // before their drawn prompt (which stays theirs). With the prefix cache on
  // (RunInputs::prefix_cache) the scheduler's run reuses its blocks.
  int32_t shared_prefix = 0;
  double share_ratio = 0;

  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
  std::string Describe() const;
};

struct PlannedRequest {
  int32_t prompt_tokens = 1;   // the shared prefix included
  int32_t prefix_tokens = 0;   // of those, the workload's shared prefix (0: none)
  int32_t output_tokens = 1;   // until the simulated EOS
  int32_t max_new_tokens = 1;  // clamped to the context, as beacon-serve does
  double arrival_s = 0;        // Poisson: absolute; closed loop: unused (on demand)
};

// The workload's requests for a model of `context_length` positions: prompts
// are clamped to context - 1 and max_tokens to context - prompt
// (engine/serving/serve_request.cc's rule).
std::vector<PlannedRequest> GenerateRequests(const WorkloadSpec& w, int32_t context_length);

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_WORKLOAD_H_
