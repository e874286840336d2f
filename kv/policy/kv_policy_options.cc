// KvPolicyOptions defaults, validation and the policy factory (over the
// registry, kv/policy/policy_registry.h).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/policy_registry.h"

namespace beacon {

absl::StatusOr<std::vector<KvPolicyKind>> ParseKvPolicies(std::string_view comma_separated) {
  std::vector<KvPolicyKind> out;
  for (absl::string_view name :
       absl::StrSplit(absl::string_view(comma_separated.data(), comma_separated.size()), ',', absl::SkipEmpty())) {
    absl::StatusOr<KvPolicyKind> p = ParseKvPolicy(std::string_view(name.data(), name.size()));
    if (!p.ok()) return p.status();
    out.push_back(*p);
  }
  return out;
}

KvPolicyOptions KvPolicyOptions::DefaultsFor(KvPolicyKind policy) {
  KvPolicyOptions o;
  o.policy = policy;
  const KvPolicySpec& spec = KvPolicySpecOf(policy);
  if (spec.published != nullptr) spec.published(&o);
  return o;
}

absl::StatusOr<KvPolicyOptions> KvPolicyOptions::DefaultsForName(std::string_view name) {
  absl::StatusOr<KvPolicyKind> policy = ParseKvPolicy(name);
  if (!policy.ok()) return policy.status();
  return DefaultsFor(*policy);
}

absl::Status KvPolicyOptions::Validate() const {
  auto bad = [](const char* field, auto value, const std::string& rule) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " ", rule));
  };
  if (budget < 1) return bad("kv_budget", budget, "must be >= 1");
  if (interval < 1) return bad("kv_interval", interval, "must be >= 1");
  if (eviction_phase < 0 || eviction_phase >= interval) {
    return bad("kv_eviction_phase", eviction_phase, absl::StrCat("must be in [0, kv_interval = ", interval, ")"));
  }
  if (sinks < 0) return bad("kv_sinks", sinks, "must be >= 0");
  if (window < 0) return bad("kv_window", window, "must be >= 0");
  if (!keep_prompt && sinks + window > budget) {
    return bad("kv_budget", budget, absl::StrCat("must hold sinks + window (", sinks + window, ")"));
  }
  if (keep_prompt && window > budget)
    return bad("kv_budget", budget, absl::StrCat("must hold the window (", window, ")"));
  if (recent_queries < 1 || recent_queries > 1024)
    return bad("kv_recent_queries", recent_queries, "must be in [1, 1024]");
  if (beacons < 1) return bad("kv_beacons", beacons, "must be >= 1");
  if (fps_bound <= beacons)
    return bad("kv_fps_bound", fps_bound, absl::StrCat("must exceed kv_beacons (", beacons, ")"));
  if (fps_bound > 4096) return bad("kv_fps_bound", fps_bound, "must be <= 4096");
  if (beacon_group_queries && beacon_filter != BeaconFilter::kAll) {
    return absl::InvalidArgumentError(
        "kv_beacon_group_queries: needs kv_beacon_filter all (the global filter admits each query head by its own "
        "attention mass)");
  }
  if (!(global_threshold >= 0.0f && global_threshold <= 1.0f)) {
    return bad("kv_global_threshold", global_threshold, "must be in [0, 1]");
  }
  if (pool_kernel < 1 || pool_kernel % 2 == 0 || pool_kernel > 63) {
    return bad("kv_pool_kernel", pool_kernel, "must be odd, in [1, 63]");
  }
  if (!(lambda >= 0.0f && lambda <= 1.0f)) return bad("kv_lambda", lambda, "must be in [0, 1]");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvPolicy>> CreateKvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  if (absl::Status s = o.Validate(); !s.ok()) return s;
  std::unique_ptr<KvPolicy> p = KvPolicySpecOf(o.policy).create(o, m);
  if (p == nullptr) return absl::InvalidArgumentError("kv_policy: not a policy");
  p->set_options(o);
  return p;
}

}  // namespace beacon
