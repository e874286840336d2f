#include "kv/policy/policy_registry.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kv/policy/policies.h"
#include "kv/policy/policy_bytes.h"
#include "util/utf8.h"

namespace beacon {
namespace {

// `full` never evicts: the compressor does not call Score on it.
class FullPolicy : public KvPolicy {
 public:
  std::string_view name() const override { return "full"; }
  void Score(int, int, const KeysView& keys, int32_t, float* scores) override {
    for (int32_t s = 0; s < keys.n_slots(); ++s) scores[s] = 1.0f;
  }
};

std::unique_ptr<KvPolicy> NewFullPolicy(const KvPolicyOptions&, const PolicyModelInfo&) {
  return std::make_unique<FullPolicy>();
}

int32_t RecentQueries(const KvPolicyOptions& o) { return o.recent_queries; }
bool Always(const KvPolicyOptions&) { return true; }
// SnapKV keeps its observation window's own KV (the concatenation with
// k_cur in its Algorithm 1) and scores only the keys before it.
int32_t ObservationWindow(const KvPolicyOptions& o) { return o.recent_queries; }
// H2O: heavy-hitter and recent slots split the budget evenly (the 50%/50% split of its experiments).
int32_t HalfTheBudget(const KvPolicyOptions& o) { return o.budget / 2; }

// The registry. A new policy: an enumerator in kv_policy.h, its constructor
// in policies.h and its own file, and one row here (docs/development.md).
constexpr std::array<KvPolicySpec, 7> kRegistry = {{
    {KvPolicyKind::kFull, "full", "no eviction: the whole cache", nullptr, NewFullPolicy},
    {KvPolicyKind::kStreaming, "streaming", "attention sinks and the most recent tokens (StreamingLLM)", nullptr,
     NewStreamingPolicy},
    {KvPolicyKind::kH2o, "h2o", "heavy hitters: attention accumulated over decode steps (H2O)", nullptr, NewH2oPolicy,
     nullptr, Always, false, HalfTheBudget, AccumulatorStateBytes},
    {KvPolicyKind::kSnapKv, "snapkv", "attention of the last recent queries, max-pooled (SnapKV)",
     [](KvPolicyOptions* o) {
       o->recent_queries = 32;  // SnapKV: observation window 32
       o->pool_kernel = 7;      // pooling kernel 5-7
     },
     NewSnapKvPolicy, RecentQueries, nullptr, false, ObservationWindow, QueryRingStateBytes},
    {KvPolicyKind::kRkv, "rkv", "attention importance minus key redundancy (R-KV)",
     [](KvPolicyOptions* o) {
       o->recent_queries = 8;  // R-KV: 8 recent queries, max-pool 7, lambda 0.1
       o->pool_kernel = 7;
       o->lambda = 0.1f;
     },
     NewRkvPolicy, RecentQueries, nullptr, /*key_redundancy=*/true, nullptr, QueryRingStateBytes},
    {KvPolicyKind::kRandom, "random", "seeded random scores: the null baseline", nullptr, NewRandomPolicy},
    {KvPolicyKind::kBeacon, "beacon", "recent queries and FPS-chosen beacon queries over the whole history (BeaconKV)",
     nullptr, NewBeaconPolicy, [](const KvPolicyOptions& o) { return o.recent_queries + o.beacons; },
     [](const KvPolicyOptions& o) { return o.beacon_filter == BeaconFilter::kGlobal; }, false, nullptr,
     BeaconStateBytes},
}};
// Row i has kind i (KvPolicySpecOf indexes by the enumerator). That every row
// has a constructor is tests/kv/policy/policy_registry_test.cc's to check: comparing
// a function's address with null is not a constant expression under UBSan.
static_assert([] {
  for (size_t i = 0; i < kRegistry.size(); ++i) {
    if (static_cast<size_t>(kRegistry[i].kind) != i) return false;
  }
  return true;
}());

// The kinds and names in registry order, for the span accessors.
constexpr std::array<KvPolicyKind, kRegistry.size()> kKinds = [] {
  std::array<KvPolicyKind, kRegistry.size()> k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = kRegistry[i].kind;
  return k;
}();
constexpr std::array<std::string_view, kRegistry.size()> kNames = [] {
  std::array<std::string_view, kRegistry.size()> n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = kRegistry[i].name;
  return n;
}();

std::string JoinNames(bool compressing_only, const char* separator) {
  std::string out;
  for (const KvPolicySpec& s : kRegistry) {
    if (compressing_only && s.kind == KvPolicyKind::kFull) continue;
    absl::StrAppend(&out, out.empty() ? "" : separator, std::string(s.name));
  }
  return out;
}

}  // namespace

std::span<const KvPolicySpec> KvPolicyRegistry() { return kRegistry; }

const KvPolicySpec& KvPolicySpecOf(KvPolicyKind kind) {
  const size_t i = static_cast<size_t>(kind);
  return kRegistry[i < kRegistry.size() ? i : 0];
}

int32_t ProtectedWindow(const KvPolicyOptions& o) {
  const KvPolicySpec& spec = KvPolicySpecOf(o.policy);
  if (spec.protected_window == nullptr) return o.window;
  // What validation lets the window take: the budget, less the sinks when
  // the budget counts them (keep_prompt off).
  const int32_t most = std::max(o.window, o.keep_prompt ? o.budget : o.budget - o.sinks);
  return std::clamp(spec.protected_window(o), o.window, most);
}

std::string CompressingPolicyNames() { return JoinNames(true, ","); }
std::string AllPolicyNames() { return JoinNames(false, ","); }

std::span<const KvPolicyKind> KvPolicyKinds() { return kKinds; }
std::span<const std::string_view> KvPolicyNames() { return kNames; }

std::string_view KvPolicyName(KvPolicyKind policy) {
  const size_t i = static_cast<size_t>(policy);
  return i < kNames.size() ? kNames[i] : "?";
}

absl::StatusOr<KvPolicyKind> ParseKvPolicy(std::string_view name) {
  for (const KvPolicySpec& s : kRegistry) {
    if (s.name == name) return s.kind;
  }
  // (Debian's abseil string_view is not std::string_view.)
  return absl::InvalidArgumentError(
      absl::StrCat("kv_policy: unknown policy '", Excerpt(name), "' (known: ", JoinNames(false, ", "), ")"));
}

}  // namespace beacon
