#include "kv/store/compaction.h"

#include <cassert>
#include <cstring>

namespace beacon {

void CompactLayer(KvCache* cache, const SequenceKv& seq, int layer, std::span<const std::vector<int32_t>> keep) {
  const KvCacheShape& shape = cache->shape();
  const int bs = shape.block_size;
  const size_t row_bytes = shape.row_bytes();
  const std::vector<int32_t>& blocks = seq.block_ids();
  assert(static_cast<int>(keep.size()) == shape.n_kv_heads);
  for (int h = 0; h < shape.n_kv_heads; ++h) {
    // Ascending sources and i <= keep[h][i]: moving front to back never
    // overwrites a slot that is still to be read.
    for (size_t i = 0; i < keep[h].size(); ++i) {
      const int32_t from = keep[h][i];
      const int32_t to = static_cast<int32_t>(i);
      assert(from >= to && from < seq.num_slots());
      if (from == to) continue;
      const int32_t fb = blocks[from / bs], tb = blocks[to / bs];
      const int fo = from % bs, to_off = to % bs;
      auto* kt = static_cast<uint8_t*>(cache->KData(layer, tb, h));
      auto* vt = static_cast<uint8_t*>(cache->VData(layer, tb, h));
      const auto* kf = static_cast<const uint8_t*>(cache->KData(layer, fb, h));
      const auto* vf = static_cast<const uint8_t*>(cache->VData(layer, fb, h));
      std::memcpy(kt + to_off * row_bytes, kf + fo * row_bytes, row_bytes);
      std::memcpy(vt + to_off * row_bytes, vf + fo * row_bytes, row_bytes);
      cache->Positions(layer, tb, h)[to_off] = cache->Positions(layer, fb, h)[fo];
    }
  }
}

}  // namespace beacon
