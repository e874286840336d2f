// The --kv-* flags shared by beacon-run and beacon-serve: a policy name and
// overrides of that policy's published defaults (KvPolicyOptions::DefaultsFor).
#ifndef BEACON_CLI_KV_FLAGS_H_
#define BEACON_CLI_KV_FLAGS_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "kv/policy/kv_policy.h"
#include "kv/policy/policy_registry.h"
#include "util/cli_args.h"

namespace beacon {

inline void DeclareKvFlags(cli::Args* args, const std::string& default_policy) {
  args->Declare("kv-policy", false, default_policy, "KV policy: " + AllPolicyNames());
  args->Declare("kv-budget", false, "", "slots kept per KV head (generated tokens when the prompt is kept)");
  args->Declare("kv-interval", false, "", "decode steps between evictions");
  args->Declare("kv-sinks", false, "", "first tokens always kept");
  args->Declare("kv-window", false, "", "most recent tokens always kept");
  args->Declare("kv-keep-prompt", true, "", "never evict prompt tokens (unset: the policy's default)");
  args->Declare("kv-recent-queries", false, "", "R: recent queries that score the cache");
  args->Declare("kv-beacons", false, "", "K: beacon queries per head (beacon)");
  args->Declare("kv-fps-bound", false, "", "U: FPS buffer bound (beacon)");
  args->Declare("kv-beacon-filter", false, "", "all or global (beacon)");
  args->Declare("kv-beacon-prompt-queries", true, "",
                "prompt queries enter the FPS buffer (beacon, filter all; unset: the policy's default)");
  args->Declare("kv-beacon-group-queries", true, "",
                "one ring and FPS buffer per KV head, of its group's mean query: state / GQA group (beacon)");
  args->Declare("kv-pool-kernel", false, "", "max-pool kernel over token order (odd, 1 = off)");
  args->Declare("kv-lambda", false, "", "importance weight against redundancy (rkv)");
  args->Declare("kv-seed", false, "", "seed of the random policy");
  args->Declare("kv-eviction-phase", false, "spread",
                "spread: a request's first eviction comes 0..interval-1 steps early, by a hash of its prompt (and "
                "sample), so requests admitted together evict on different steps; aligned: the published schedule");
}

// --kv-eviction-phase: true for spread (EvictionSchedule::SpreadPhase),
// false for aligned. beacon-run and beacon-serve give the same prompt the
// same phase, so they give it the same text.
inline absl::StatusOr<bool> ParseSpreadEvictionPhase(const cli::Args& args) {
  const std::string phase = args.Str("kv-eviction-phase");
  if (phase != "spread" && phase != "aligned") {
    return absl::InvalidArgumentError("--kv-eviction-phase: '" + phase + "' must be spread or aligned");
  }
  return phase == "spread";
}

// --kv-* flags over the chosen policy's published defaults.
inline absl::Status ParseKvOptions(const cli::Args& args, KvPolicyOptions* kv) {
  absl::StatusOr<KvPolicyOptions> defaults = KvPolicyOptions::DefaultsForName(args.Str("kv-policy"));
  if (!defaults.ok()) return defaults.status();
  *kv = *std::move(defaults);
  auto set_int = [&](const char* flag, int32_t* field) -> absl::Status {
    if (!args.Has(flag)) return absl::OkStatus();
    absl::StatusOr<int64_t> v = args.Int(flag);
    if (!v.ok()) return v.status();
    *field = static_cast<int32_t>(*v);
    return absl::OkStatus();
  };
  for (auto [flag, field] :
       std::initializer_list<std::pair<const char*, int32_t*>>{{"kv-budget", &kv->budget},
                                                               {"kv-interval", &kv->interval},
                                                               {"kv-sinks", &kv->sinks},
                                                               {"kv-window", &kv->window},
                                                               {"kv-recent-queries", &kv->recent_queries},
                                                               {"kv-beacons", &kv->beacons},
                                                               {"kv-fps-bound", &kv->fps_bound},
                                                               {"kv-pool-kernel", &kv->pool_kernel}}) {
    if (absl::Status s = set_int(flag, field); !s.ok()) return s;
  }
  if (args.Has("kv-keep-prompt")) kv->keep_prompt = args.Flag("kv-keep-prompt");
  if (args.Has("kv-beacon-filter")) {
    const std::string v = args.Str("kv-beacon-filter");
    if (v != "all" && v != "global") return absl::InvalidArgumentError("--kv-beacon-filter must be all or global");
    kv->beacon_filter = v == "all" ? BeaconFilter::kAll : BeaconFilter::kGlobal;
  }
  if (args.Has("kv-beacon-prompt-queries")) kv->beacon_prompt_queries = args.Flag("kv-beacon-prompt-queries");
  if (args.Has("kv-beacon-group-queries")) kv->beacon_group_queries = args.Flag("kv-beacon-group-queries");
  if (args.Has("kv-lambda")) {
    absl::StatusOr<double> v = args.Double("kv-lambda");
    if (!v.ok()) return v.status();
    kv->lambda = static_cast<float>(*v);
  }
  if (args.Has("kv-seed")) {
    absl::StatusOr<int64_t> v = args.Int("kv-seed");
    if (!v.ok()) return v.status();
    kv->seed = static_cast<uint64_t>(*v);
  }
  return kv->Validate();
}

}  // namespace beacon

#endif  // BEACON_CLI_KV_FLAGS_H_
