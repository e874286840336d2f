// Constructors of the individual policies (one .cc file each), used by
// CreateKvPolicy. Options are validated before these are called.
#ifndef BEACON_KV_POLICY_POLICIES_H_
#define BEACON_KV_POLICY_POLICIES_H_

#include <memory>

#include "kv/policy/kv_policy.h"

namespace beacon {

// Sinks + most recent tokens (StreamingLLM): scores slots by recency.
std::unique_ptr<KvPolicy> NewStreamingPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m);
// Cumulative attention received by each slot over decode steps (H2O).
std::unique_ptr<KvPolicy> NewH2oPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m);
// Attention of the last `recent_queries` queries, pooled (SnapKV).
std::unique_ptr<KvPolicy> NewSnapKvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m);
// Attention importance minus key redundancy (R-KV), weighted by lambda.
std::unique_ptr<KvPolicy> NewRkvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m);
// Seeded random scores: the null baseline.
std::unique_ptr<KvPolicy> NewRandomPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m);
// Recent queries + FPS-selected beacon queries (BeaconKV).
std::unique_ptr<KvPolicy> NewBeaconPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m);

}  // namespace beacon

#endif  // BEACON_KV_POLICY_POLICIES_H_
