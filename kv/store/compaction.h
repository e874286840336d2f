// Order-preserving compaction of a sequence's slots after an eviction.
#ifndef BEACON_KV_STORE_COMPACTION_H_
#define BEACON_KV_STORE_COMPACTION_H_

#include <cstdint>
#include <span>
#include <vector>

#include "kv/store/kv_cache.h"

namespace beacon {

// For every KV head h of `layer`, moves the K, V and position of slot
// keep[h][i] to slot i, so the kept tokens sit at the front in their original
// order. Slots past keep[h].size() are left as they were (the caller then
// truncates the sequence, which returns whole tail blocks to the pool).
// REQUIRES keep.size() == n_kv_heads; every keep[h] strictly ascending, of
// the same size, within [0, seq.num_slots()).
void CompactLayer(KvCache* cache, const SequenceKv& seq, int layer, std::span<const std::vector<int32_t>> keep);

}  // namespace beacon

#endif  // BEACON_KV_STORE_COMPACTION_H_
