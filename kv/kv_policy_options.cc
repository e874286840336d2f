// KvPolicyOptions defaults, validation and the policy factory.
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kv/kv_policy.h"
#include "kv/policies.h"

namespace beacon {
namespace {

// Both in the enum's order: KvPolicyName indexes kNames by the enum's value.
constexpr std::array<KvPolicyKind, 7> kKinds = {KvPolicyKind::kFull,   KvPolicyKind::kStreaming, KvPolicyKind::kH2o,
                                                KvPolicyKind::kSnapKv, KvPolicyKind::kRkv,       KvPolicyKind::kRandom,
                                                KvPolicyKind::kBeacon};
constexpr std::array<std::string_view, 7> kNames = {"full", "streaming", "h2o", "snapkv", "rkv", "random", "beacon"};
static_assert([] {
  for (size_t i = 0; i < kKinds.size(); ++i) {
    if (static_cast<size_t>(kKinds[i]) != i) return false;
  }
  return true;
}());

// `full` never evicts: the compressor does not call Score on it.
class FullPolicy : public KvPolicy {
 public:
  std::string_view name() const override { return "full"; }
  void Score(int, int, const KeysView& keys, int32_t, float* scores) override {
    for (int32_t s = 0; s < keys.n_slots(); ++s) scores[s] = 1.0f;
  }
};

}  // namespace

std::span<const KvPolicyKind> KvPolicyKinds() { return kKinds; }
std::span<const std::string_view> KvPolicyNames() { return kNames; }

std::string_view KvPolicyName(KvPolicyKind policy) {
  const size_t i = static_cast<size_t>(policy);
  return i < kNames.size() ? kNames[i] : "?";
}

absl::StatusOr<KvPolicyKind> ParseKvPolicy(std::string_view name) {
  std::string names;  // (Debian's abseil string_view is not std::string_view.)
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return kKinds[i];
    names += (names.empty() ? "" : ", ") + std::string(kNames[i]);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kv_policy: unknown policy '", std::string(name), "' (known: ", names, ")"));
}

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
  if (policy == KvPolicyKind::kSnapKv) {
    o.recent_queries = 32;  // SnapKV: observation window 32
    o.pool_kernel = 7;      // pooling kernel 5-7
  } else if (policy == KvPolicyKind::kRkv) {
    o.recent_queries = 8;  // R-KV: 8 recent queries, max-pool 7, lambda 0.1
    o.pool_kernel = 7;
    o.lambda = 0.1f;
  }
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
  std::unique_ptr<KvPolicy> p;
  switch (o.policy) {
    case KvPolicyKind::kFull: p = std::make_unique<FullPolicy>(); break;
    case KvPolicyKind::kStreaming: p = NewStreamingPolicy(o, m); break;
    case KvPolicyKind::kH2o: p = NewH2oPolicy(o, m); break;
    case KvPolicyKind::kSnapKv: p = NewSnapKvPolicy(o, m); break;
    case KvPolicyKind::kRkv: p = NewRkvPolicy(o, m); break;
    case KvPolicyKind::kRandom: p = NewRandomPolicy(o, m); break;
    case KvPolicyKind::kBeacon: p = NewBeaconPolicy(o, m); break;
  }
  if (p == nullptr) return absl::InvalidArgumentError("kv_policy: not a policy");
  p->set_options(o);
  return p;
}

}  // namespace beacon
