// The KV policy registry: one row per policy, the one place the rest of the
// tree learns what policies exist and what each needs (issue 33: adding a
// policy is one registry entry plus the policy's own files; the list of
// files is in docs/development.md "Adding a KV policy").
//
// A row names the policy (its wire, flag and report name), applies its
// paper's settings (KvPolicyOptions::DefaultsFor), builds its CPU object
// (CreateKvPolicy), and says what one eviction reads, which the capacity
// planner's cost model prices (planner/cost_model.h). What is not here
// stays generic: the server lists every row (GetModelInfo), flags and
// benchmarks take every row's name, the load tester asks the server, and
// the CUDA backend runs full and beacon and refuses the rest by name
// (engine/cuda/cuda_backend.h CheckPolicy).
#ifndef BEACON_KV_POLICY_POLICY_REGISTRY_H_
#define BEACON_KV_POLICY_POLICY_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kv/policy/kv_policy.h"

namespace beacon {

struct KvPolicySpec {
  KvPolicyKind kind = KvPolicyKind::kFull;
  std::string_view name;     // lowercase, unique: the wire, flag and report name
  std::string_view summary;  // one line: what it keeps (help text, docs)
  // The paper's settings over the common defaults; null: none.
  void (*published)(KvPolicyOptions* o) = nullptr;
  // The CPU policy object; called with validated options.
  std::unique_ptr<KvPolicy> (*create)(const KvPolicyOptions& o, const PolicyModelInfo& m) = nullptr;
  // What one eviction reads, for the cost model: queries per query head it
  // keeps and scores the cache with (null: none), whether it reads every
  // decode step's attention probabilities (null: no), and whether it
  // compares keys with keys (R-KV's redundancy).
  int32_t (*scoring_queries)(const KvPolicyOptions& o) = nullptr;
  bool (*observes_attention)(const KvPolicyOptions& o) = nullptr;
  bool key_redundancy = false;
  // The newest slots the policy always keeps, when its paper fixes them
  // otherwise than `window` (null: o.window): SnapKV keeps its observation
  // window, H2O splits its budget evenly between recent and heavy slots
  // (docs/fidelity.md "Peers against their papers"). Called with validated
  // options; ProtectedWindow clamps the result to [o.window, the budget less
  // the sinks it counts].
  int32_t (*protected_window)(const KvPolicyOptions& o) = nullptr;
  // Bytes of one sequence's policy state beside its KV slots when it holds
  // `slots` slots per KV head (kv/policy/policy_bytes.h says what is counted);
  // affine in `slots`. Null: none.
  int64_t (*state_bytes)(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t slots) = nullptr;
};

// Every row, in KvPolicyKind order (row i has kind i: checked at compile time).
std::span<const KvPolicySpec> KvPolicyRegistry();
// The row of `kind` (every enumerator has one).
const KvPolicySpec& KvPolicySpecOf(KvPolicyKind kind);
// The names of the compressing policies (every row but full), comma-separated
// in registry order: the default policy list of the benchmarks and the eval.
std::string CompressingPolicyNames();
// Every name, comma-separated: flag help and error messages.
std::string AllPolicyNames();

// The newest slots `o`'s policy always keeps: its row's protected_window
// within [o.window, o.budget] (o.budget - o.sinks without keep_prompt, whose
// budget counts the sinks), else o.window. REQUIRES validated options.
int32_t ProtectedWindow(const KvPolicyOptions& o);

}  // namespace beacon

#endif  // BEACON_KV_POLICY_POLICY_REGISTRY_H_
