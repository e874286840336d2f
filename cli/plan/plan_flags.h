// beacon-plan's command line into a PlanSetup: every option, its range and
// how options combine (--reproduce fixes the workload, --rate or
// --concurrency, --slo and what needs it). Errors are INVALID_ARGUMENT (or
// NOT_FOUND for a missing model or GPU profile) naming the option. Where
// shipped files are found is decided here (--gpu-profile-dir, then ./, then
// the source tree), not in the planner library.
#ifndef BEACON_CLI_PLAN_PLAN_FLAGS_H_
#define BEACON_CLI_PLAN_PLAN_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kv/policy/kv_policy.h"
#include "planner/report.h"
#include "util/cli_args.h"

namespace beacon::planner {

// What the program runs: the report's inputs (results empty) and each KV
// configuration asked.
struct PlanSetup {
  PlanReport report;
  std::vector<KvPolicyOptions> configs;
  int32_t slo_requests = 0;  // 0: the search's default
  std::string json_path, out_dir;
  bool quiet = false, reproduce = false;
  int32_t prompt_tokens = 0;  // --reproduce: the assumed prompt
};

void DeclarePlanFlags(cli::Args* args);
// REQUIRES args parsed (and its environment loaded) with DeclarePlanFlags's flags.
absl::StatusOr<PlanSetup> ParsePlanSetup(const cli::Args& args);

}  // namespace beacon::planner

#endif  // BEACON_CLI_PLAN_PLAN_FLAGS_H_
