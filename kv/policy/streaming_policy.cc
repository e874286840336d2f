// StreamingLLM (Xiao et al., 2023, "Efficient Streaming Language Models with
// Attention Sinks"): keep the attention sinks and the most recent tokens.
//
// The sinks (and the prompt, under keep_prompt) are protected by the common
// selection rule (selection.h); this policy only has to prefer recency among
// the rest, so a slot's score is its slot index. Slots are in token order
// (compaction preserves order), so the highest indices are the most recent
// tokens and the kept set is sinks + protected + the last `budget` slots.
// The score is the slot index rather than the token position so that a test
// (or a caller) feeding arbitrary positions still gets "latest slot wins";
// for a sequence the two orders agree.
#include <memory>

#include "kv/policy/kv_policy.h"
#include "kv/policy/policies.h"

namespace beacon {
namespace {

class StreamingPolicy final : public KvPolicy {
 public:
  std::string_view name() const override { return "streaming"; }

  // Exact in float up to 2^24 slots, far beyond any cache this serves.
  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    const int32_t n = keys.n_slots();
    for (int32_t s = 0; s < n; ++s) scores[s] = static_cast<float>(s);
  }
};

}  // namespace

std::unique_ptr<KvPolicy> NewStreamingPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  return std::make_unique<StreamingPolicy>();
}

}  // namespace beacon
