// Automatic prefix caching over a BlockPool: full prompt blocks indexed by a
// hash chain, so a request whose prompt starts with blocks another request
// already computed takes references to them and prefills only the rest
// (vLLM's automatic prefix caching, at block granularity).
//
// Identity of a block: hash(parent block's hash, its block_size token ids),
// the first block's parent being the cache's `salt`, which the owner derives
// from everything else that changes the KV (model, KV dtype, RoPE settings):
// two blocks match only with the same tokens at the same positions after
// the same prefix.
//
// Partitions (issue 35): a lookup or insert names a partition, and a
// partition other than kSharedPartition roots its chains at a hash of
// (salt, partition), so its blocks are found only under the same partition.
// The server makes one partition per tenant (the client's `cache_salt`,
// its API key under --prefix-cache-salt-per-key): whether a prefix is
// cached, which its time to first token tells, then says nothing about
// another tenant's prompts (vLLM's cache_salt). Entries also keep their tokens and parent hash, and a
// lookup compares them, so a 64-bit hash collision is a miss, never a
// wrong block.
//
// What may be inserted is the caller's contract: block i of a sequence must
// hold exactly tokens [i * bs, (i + 1) * bs) at those positions, and must
// never be written again (kv_cache.h: shared blocks are read-only). The
// engine inserts only prompt blocks of sequences that keep their prompt in
// place (engine/generation.h, Generation::CacheablePromptBlocks).
//
// Lifetime of an entry: a cached block stays reusable after its last
// sequence lets go (BlockPool idle state) until Allocate needs it back, least
// recently used first; OnReclaim then drops the entry. The cache must be
// destroyed before the pool; it forgets its blocks then (they become free).
//
// Thread ownership: the engine thread.
#ifndef BEACON_KV_SERVING_PREFIX_CACHE_H_
#define BEACON_KV_SERVING_PREFIX_CACHE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kv/policy/kv_policy.h"
#include "kv/store/block_pool.h"

namespace beacon {

// What a lookup found: the leading blocks in the cache, and how many of
// those are idle (taking them removes them from the pool's free count).
// The partition every request without a tenant shares.
inline constexpr uint64_t kSharedPartition = 0;

struct PrefixMatch {
  std::vector<int32_t> block_ids;
  int32_t idle = 0;
  int32_t blocks() const { return static_cast<int32_t>(block_ids.size()); }
};

class PrefixCache : public BlockReclaimListener {
 public:
  // `pool` must outlive the cache.
  PrefixCache(BlockPool* pool, int32_t block_size, uint64_t salt);
  ~PrefixCache() override;
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest run of `tokens`' leading full blocks that is cached, at most
  // `max_blocks` of them, within `partition`. Takes nothing.
  PrefixMatch Find(std::span<const int32_t> tokens, int32_t max_blocks, uint64_t partition = kSharedPartition) const;
  // Handles on a Find result's blocks (REQUIRES nothing was allocated since
  // the Find: an idle block could have been reclaimed).
  std::vector<BlockHandle> Take(const PrefixMatch& match);
  // Indexes `block_ids[i]` as holding tokens [i * bs, (i + 1) * bs) for
  // i < n_blocks (REQUIRES tokens.size() >= n_blocks * bs and every block
  // held). Blocks already indexed are skipped; a block whose content another
  // block already holds stays uncached (the first copy serves). The blocks
  // are found only by lookups in the same `partition`.
  void Insert(std::span<const int32_t> tokens, std::span<const int32_t> block_ids, int32_t n_blocks,
              uint64_t partition = kSharedPartition);

  // Forgets every entry (blocks idle now become free).
  void Clear();

  int32_t num_blocks() const { return static_cast<int32_t>(entries_.size()); }
  int32_t block_size() const { return block_size_; }
  uint64_t salt() const { return salt_; }

  // BlockReclaimListener: the pool reuses an idle block.
  void OnReclaim(int32_t id) override;

 private:
  struct Entry {
    int32_t block = -1;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;  // block_size ids
  };
  uint64_t ChainHash(uint64_t parent, std::span<const int32_t> block_tokens) const;
  // The parent of a partition's first block: the salt itself when shared.
  uint64_t Root(uint64_t partition) const;
  // The entry for (parent, block_tokens) if cached with exactly that content.
  const Entry* Lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> block_tokens) const;

  BlockPool* pool_;
  int32_t block_size_;
  uint64_t salt_;
  absl::flat_hash_map<uint64_t, Entry> entries_;  // by chain hash
  std::vector<uint64_t> hash_of_;                 // by block id, for cached blocks
};

// Whether a sequence under `options` may take cached (or a sibling's) prompt
// blocks instead of running those tokens, with output equal to running them:
// the policy's state must not depend on the skipped prompt queries. Under
// `full` nothing does. A compressing policy needs keep_prompt (else
// compaction moves prompt slots, which then are not the cached ones) and
// budget >= recent_queries: the first eviction comes after more than
// `budget` decode queries, so the recent ring (SnapKV's window, R-KV's and
// BeaconKV's ring) holds none of the prompt's by then; H2O observes decode
// attention only; BeaconKV's FPS buffers must not take prompt queries
// (beacon_prompt_queries under the kAll filter; kGlobal never takes them).
bool PrefixShareable(const KvPolicyOptions& options);

// The share arithmetic, one home for the real engine (engine/generation.h)
// and the simulator (scheduler/sim_engine.h), so both admit alike.
//
// Leading prompt blocks a sequence may take from the prefix cache or a
// sibling instead of running them: the whole blocks before the prompt's
// last token (that token always runs: its logits sample the first output
// token); none when the policy cannot share (PrefixShareable) or the request
// wants prompt logprobs (every prompt token's logits are then computed).
int32_t ShareablePromptBlocks(const KvPolicyOptions& options, bool prompt_logprobs, int32_t prompt_len,
                              int32_t block_size);

// Leading blocks of a sequence that may be indexed in the prefix cache now:
// the whole blocks of its prompt written so far (`prompt_done` prompt tokens
// run, `slots` held); none when compaction may move prompt slots (a
// compressing policy without keep_prompt).
int32_t CacheablePromptBlocks(const KvPolicyOptions& options, int32_t prompt_len, int32_t prompt_done, int32_t slots,
                              int32_t block_size);

// A salt from the settings that change a block's K/V for the same tokens:
// combine the model's identity, the KV dtype and the RoPE table's inputs.
uint64_t PrefixCacheSalt(std::span<const uint64_t> parts);

}  // namespace beacon

#endif  // BEACON_KV_SERVING_PREFIX_CACHE_H_
