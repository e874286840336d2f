#include "kv/serving/prefix_cache.h"

#include <algorithm>
#include <cassert>

#include "util/splitmix.h"

namespace beacon {

bool PrefixShareable(const KvPolicyOptions& options) {
  if (!options.compresses()) return true;
  if (!options.keep_prompt || options.budget < options.recent_queries) return false;
  return !(options.policy == KvPolicyKind::kBeacon && options.beacon_filter == BeaconFilter::kAll &&
           options.beacon_prompt_queries);
}

int32_t ShareablePromptBlocks(const KvPolicyOptions& options, bool prompt_logprobs, int32_t prompt_len,
                              int32_t block_size) {
  if (prompt_logprobs || prompt_len < 1 || block_size < 1 || !PrefixShareable(options)) return 0;
  return (prompt_len - 1) / block_size;
}

int32_t CacheablePromptBlocks(const KvPolicyOptions& options, int32_t prompt_len, int32_t prompt_done, int32_t slots,
                              int32_t block_size) {
  if ((options.compresses() && !options.keep_prompt) || block_size < 1) return 0;
  return std::max(0, std::min(std::min(prompt_done, prompt_len), slots)) / block_size;
}

uint64_t PrefixCacheSalt(std::span<const uint64_t> parts) {
  uint64_t h = 0x626561636f6e6b76ull;  // "beaconkv"
  for (uint64_t p : parts) h = SplitMix64(h ^ p);
  return h;
}

PrefixCache::PrefixCache(BlockPool* pool, int32_t block_size, uint64_t salt)
    : pool_(pool), block_size_(block_size), salt_(salt), hash_of_(pool->num_blocks(), 0) {
  pool_->set_reclaim_listener(this);
}

PrefixCache::~PrefixCache() {
  Clear();
  pool_->set_reclaim_listener(nullptr);
}

uint64_t PrefixCache::ChainHash(uint64_t parent, std::span<const int32_t> block_tokens) const {
  uint64_t h = SplitMix64(parent);
  for (int32_t t : block_tokens) h = SplitMix64(h ^ static_cast<uint32_t>(t));
  return h;
}

uint64_t PrefixCache::Root(uint64_t partition) const {
  if (partition == kSharedPartition) return salt_;
  // Two rounds, so that no partition's root is another's chain hash by
  // construction (a collision is still only a miss: Lookup compares).
  return SplitMix64(SplitMix64(salt_ ^ 0x74656e616e74ull) ^ partition);  // "tenant"
}

const PrefixCache::Entry* PrefixCache::Lookup(uint64_t hash, uint64_t parent,
                                              std::span<const int32_t> block_tokens) const {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return nullptr;
  const Entry& e = it->second;
  if (e.parent != parent || !std::equal(block_tokens.begin(), block_tokens.end(), e.tokens.begin(), e.tokens.end())) {
    return nullptr;  // a hash collision: not this content
  }
  return &e;
}

PrefixMatch PrefixCache::Find(std::span<const int32_t> tokens, int32_t max_blocks, uint64_t partition) const {
  PrefixMatch m;
  const int32_t n = std::min<int32_t>(max_blocks, static_cast<int32_t>(tokens.size()) / block_size_);
  uint64_t parent = Root(partition);
  for (int32_t b = 0; b < n; ++b) {
    const std::span<const int32_t> bt = tokens.subspan(static_cast<size_t>(b) * block_size_, block_size_);
    const uint64_t h = ChainHash(parent, bt);
    const Entry* e = Lookup(h, parent, bt);
    if (e == nullptr) break;
    m.block_ids.push_back(e->block);
    m.idle += pool_->refcount(e->block) == 0;
    parent = h;
  }
  return m;
}

std::vector<BlockHandle> PrefixCache::Take(const PrefixMatch& match) {
  std::vector<BlockHandle> out;
  out.reserve(match.block_ids.size());
  for (int32_t id : match.block_ids) out.push_back(pool_->Acquire(id));
  return out;
}

void PrefixCache::Insert(std::span<const int32_t> tokens, std::span<const int32_t> block_ids, int32_t n_blocks,
                         uint64_t partition) {
  assert(tokens.size() >= static_cast<size_t>(n_blocks) * block_size_ &&
         block_ids.size() >= static_cast<size_t>(n_blocks));
  uint64_t parent = Root(partition);
  for (int32_t b = 0; b < n_blocks; ++b) {
    const std::span<const int32_t> bt = tokens.subspan(static_cast<size_t>(b) * block_size_, block_size_);
    const uint64_t h = ChainHash(parent, bt);
    const int32_t id = block_ids[b];
    auto it = entries_.find(h);
    if (it == entries_.end() && !pool_->cached(id)) {
      entries_.emplace(h, Entry{id, parent, std::vector<int32_t>(bt.begin(), bt.end())});
      hash_of_[id] = h;
      pool_->MarkCached(id);
    }
    // Else: this content is cached already (maybe in another block: that
    // copy serves, this one stays private), or a colliding hash holds the
    // slot (the block stays private: correctness over reuse).
    parent = h;
  }
}

void PrefixCache::Clear() {
  for (const auto& [hash, e] : entries_) pool_->Uncache(e.block);
  entries_.clear();
}

void PrefixCache::OnReclaim(int32_t id) { entries_.erase(hash_of_[id]); }

}  // namespace beacon
