// The KV cache manager: one home for what the serving core knows about KV
// memory. The scheduler owns it (scheduler/scheduler.h), as vLLM's scheduler
// owns its KVCacheManager, and admits, reserves, shares and preempts through
// it alike for the real engine (engine/serving/generation_engine.h) and the
// simulated ones (scheduler/sim_engine.h, the planner):
//   - the pool's facts (total, free, idle blocks; block size);
//   - one SequenceKv per sequence, owned here from Add to Remove (the
//     scheduler hands it to the engine in every step's ScheduledSeq, and the
//     engine's Generation writes it);
//   - prefix sharing: a sample group's later member takes its first
//     member's whole prompt blocks, any other sequence holding no KV takes
//     the leading blocks of its prompt from the automatic prefix cache
//     (kv/serving/prefix_cache.h); and the prompt blocks a prefill completes are
//     indexed as it goes;
//   - the arithmetic of appending (BlocksToAppend) and of what a sequence
//     has drawn on its reservation (OwnBlocks).
// It runs nothing: the engine writes a sequence's slots through its
// SequenceKv, and the scheduler reports each step's progress (OnRan,
// Release), which is all the manager needs to decide sharing.
//
// It lives in kv/ because it is KV bookkeeping over kv/'s pool and cache,
// which the scheduler may include (tests/layering.txt).
//
// Thread ownership: the engine thread.
#ifndef BEACON_KV_SERVING_KV_CACHE_MANAGER_H_
#define BEACON_KV_SERVING_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "kv/policy/kv_policy.h"
#include "kv/serving/prefix_cache.h"
#include "kv/store/kv_cache.h"

namespace beacon {

// A sequence's id, the scheduler's RequestId (kv/ may not include it).
using KvSeqId = uint64_t;

// What the manager must know of a sequence to share its KV.
struct KvSeqSpec {
  int32_t prompt_len = 0;  // >= 1
  // The prompt's token ids, the prefix cache's keys: prompt_len of them, or
  // none when the cache is off (the simulator then keeps no ids).
  std::vector<int32_t> prompt;
  KvPolicyOptions kv;            // decides whether prompt blocks may be shared or cached
  bool prompt_logprobs = false;  // every prompt token must run: nothing is taken by reference
  // A sample group's first member, whose prompt blocks this one takes
  // before it ever runs; 0 (or the sequence's own id): no group.
  KvSeqId group = 0;
  // The prefix-cache partition its prompt blocks are found and indexed in
  // (PrefixCache: kSharedPartition, or the request's tenant). A sample
  // group's members share their first member's blocks whatever it is.
  uint64_t cache_partition = kSharedPartition;
};

// What a sequence holding no KV could take by reference now (Probe).
struct KvPrefixProbe {
  // A group member whose first member is still running its prompt (or
  // recomputing it): it should wait rather than run the prompt itself.
  bool wait = false;
  int32_t blocks = 0;  // whole leading blocks it could take
  int32_t idle = 0;    // of those, idle cached ones (counted as free until taken)
};

class KvCacheManager {
 public:
  // `cache` must outlive the manager.
  explicit KvCacheManager(KvCache* cache);
  ~KvCacheManager();
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  // Turns on automatic prefix caching; `salt` names what besides the tokens
  // changes a block's K/V (PrefixCacheSalt). Before the first Add.
  void EnablePrefixCache(uint64_t salt);
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }

  // Registers a sequence holding no KV. INVALID_ARGUMENT for prompt_len < 1
  // or prompt ids of another count (none at all with the prefix cache on),
  // ALREADY_EXISTS for a live id.
  absl::Status Add(KvSeqId id, KvSeqSpec spec);
  // Frees the sequence's KV and forgets it (unknown ids are ignored).
  void Remove(KvSeqId id);
  bool contains(KvSeqId id) const { return seqs_.contains(id); }
  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }

  // The sequence's KV, null for an unknown id. The pointer is stable until
  // Remove.
  SequenceKv* kv(KvSeqId id);
  const SequenceKv* kv(KvSeqId id) const;

  // Pool facts, in blocks.
  int32_t TotalBlocks() const { return cache_->pool().num_blocks(); }
  int32_t FreeBlocks() const { return cache_->pool().num_free(); }
  int32_t IdleBlocks() const { return cache_->pool().num_idle(); }  // of FreeBlocks, idle cached ones
  int32_t BlockSize() const { return cache_->shape().block_size; }
  // Blocks the sequence would additionally take to append `n` slots now
  // (an unknown id: as if it held nothing).
  int32_t BlocksToAppend(KvSeqId id, int32_t n) const;
  // Blocks it allocated itself: its table less the leading blocks it holds
  // by reference (what its reservation has been drawn on).
  int32_t OwnBlocks(KvSeqId id) const;
  // Slots held by live sequences, physically: a block several sequences
  // hold by reference counts once, whole.
  int64_t HeldSlots() const;

  // Progress, reported by the scheduler after each step the sequence took
  // part in: `prompt_done` prompt tokens written so far in this run of the
  // prompt (a recompute counts from 0 again; values past the prompt are
  // clipped), and whether it is still prefilling (the prompt, or a
  // recompute). Indexes the prompt blocks that became cacheable.
  void OnRan(KvSeqId id, int32_t prompt_done, bool prefilling);
  // Preemption: the sequence gives every block back and will run its
  // prompt (and what it generated) again.
  void Release(KvSeqId id);

  // Prefix sharing for a sequence holding no KV, asked at its admission
  // (first, or again after preemption). Probe takes nothing.
  KvPrefixProbe Probe(KvSeqId id) const;
  // Takes what Probe just found (nothing may be allocated in between) and
  // returns the slots taken: the sequence's prefill starts past them.
  // `lookup_tokens`: the tokens its prefill would run from slot 0 (the
  // prompt, or a recompute's), counted as prefix-cache queries.
  int32_t Adopt(KvSeqId id, int32_t lookup_tokens);

  // Prefix cache counters (vLLM's prefix_cache_queries / _hits): tokens
  // looked up at admission, and of those found cached. 0 while off.
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }

 private:
  struct Seq {
    KvSeqSpec spec;
    std::unique_ptr<SequenceKv> kv;
    bool prefilling = true;  // running its prompt or a recompute (or not started)
    bool started = false;    // has finished a prompt run once (sampled): no longer takes a donor's blocks
    int32_t indexed = 0;     // leading blocks handed to the prefix cache since it last held nothing
  };
  // Where a sequence holding no KV would take its leading blocks from.
  struct Source {
    KvPrefixProbe probe;
    const SequenceKv* donor = nullptr;
    PrefixMatch match;
  };
  Source FindSource(KvSeqId id) const;

  KvCache* cache_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null: off; before seqs_ (outlives their handles)
  absl::flat_hash_map<KvSeqId, Seq> seqs_;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace beacon

#endif  // BEACON_KV_SERVING_KV_CACHE_MANAGER_H_
