// Which slots of one KV head survive an eviction, given the policy's scores:
// the common rule every policy shares, so policies differ only in scoring.
#ifndef BEACON_KV_POLICY_SELECTION_H_
#define BEACON_KV_POLICY_SELECTION_H_

#include <cstdint>
#include <vector>

#include "kv/policy/kv_policy.h"

namespace beacon {

// Slots that are kept whatever their score.
struct Protection {
  int32_t prompt_len = 0;   // tokens at positions < prompt_len are the prompt
  bool keep_prompt = true;  // protect the whole prompt
  int32_t sinks = 4;        // protect positions < sinks
  int32_t window = 32;      // protect the last `window` slots
};

// Fills `keep` with n_keep slots of [0, keys.n_slots()) of `kv_head`,
// ascending: every protected slot, then the highest `scores` among the rest
// (ties to the later slot). If more slots are protected than n_keep (not
// possible under validated options and the compressor's bound), the earliest
// protected slots are kept.
// REQUIRES n_keep <= keys.n_slots().
void SelectKeep(const float* scores, const KeysView& keys, int kv_head, const Protection& protection, int32_t n_keep,
                std::vector<int32_t>* keep);

}  // namespace beacon

#endif  // BEACON_KV_POLICY_SELECTION_H_
