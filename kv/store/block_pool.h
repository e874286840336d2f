// A fixed pool of KV-cache blocks with reference counts and RAII handles.
//
// A block is `block_size` token slots of every layer and KV head (see
// kv_cache.h for the memory layout). Sequences own blocks through BlockHandle:
// dropping the handle (finish, abort, preemption, an error path) returns the
// block, so a block cannot leak. Handles can be shared (refcount > 1) for
// prefix sharing; a block is free again when its last handle goes.
//
// Cached blocks (the prefix cache, kv/serving/prefix_cache.h): a block marked cached
// keeps its contents when its last handle goes. It becomes *idle*: not
// referenced, still indexed, and reusable by a later request (Acquire). Idle
// blocks count as free: Allocate takes truly free blocks first, then
// reclaims idle ones, least recently released first, telling the reclaim
// listener so the index forgets them. So a cache never makes an allocation
// fail that would have succeeded without it.
//
// Counts: num_used() are blocks with handles (what sequences hold, shared
// ones once), num_free() what Allocate can hand out (free + idle),
// num_idle() the idle cached ones among those.
//
// Thread ownership: the engine thread only. Not thread-safe.
#ifndef BEACON_KV_STORE_BLOCK_POOL_H_
#define BEACON_KV_STORE_BLOCK_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace beacon {

class BlockPool;

class BlockHandle {
 public:
  BlockHandle() = default;
  BlockHandle(BlockHandle&& other) noexcept;
  BlockHandle& operator=(BlockHandle&& other) noexcept;
  BlockHandle(const BlockHandle&) = delete;
  BlockHandle& operator=(const BlockHandle&) = delete;
  ~BlockHandle();

  bool valid() const { return pool_ != nullptr; }
  int32_t id() const { return id_; }
  // Another handle on the same block (refcount + 1). REQUIRES valid().
  BlockHandle Share() const;
  // Returns the block now (same as destruction).
  void Reset();

 private:
  friend class BlockPool;
  BlockHandle(BlockPool* pool, int32_t id) : pool_(pool), id_(id) {}
  BlockPool* pool_ = nullptr;
  int32_t id_ = -1;
};

// Told when Allocate reuses an idle cached block: its contents are about to
// be overwritten, so whatever indexes it must drop it.
class BlockReclaimListener {
 public:
  virtual ~BlockReclaimListener() = default;
  virtual void OnReclaim(int32_t id) = 0;
};

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  // REQUIRES every handle has been dropped (checked in debug builds).
  ~BlockPool();

  // Takes `n` blocks, all or none: RESOURCE_EXHAUSTED when fewer than `n`
  // are free (idle cached blocks included). Truly free blocks come first,
  // the most recently freed first (warm in cache; a fresh pool hands out ids
  // in increasing order); then idle cached blocks, least recently used first.
  absl::StatusOr<std::vector<BlockHandle>> Allocate(int32_t n);

  int32_t num_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()) + num_idle_; }
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Idle cached blocks (counted in num_free), and every cached block.
  int32_t num_idle() const { return num_idle_; }
  int32_t num_cached() const { return num_cached_; }
  int32_t refcount(int32_t id) const { return refcount_[id]; }
  bool cached(int32_t id) const { return cached_[id]; }

  // Marks a held block cached (REQUIRES refcount(id) > 0 and not cached).
  void MarkCached(int32_t id);
  // A handle on a cached block, idle or held (refcount + 1; an idle block
  // stops being idle). REQUIRES cached(id).
  BlockHandle Acquire(int32_t id);
  // Forgets that a block is cached: held, it is freed when its last handle
  // goes; idle, it is free now. The listener is not told (the caller is the
  // index). REQUIRES cached(id).
  void Uncache(int32_t id);
  // At most one listener; null to detach. It must outlive the pool or detach.
  void set_reclaim_listener(BlockReclaimListener* l) { listener_ = l; }

 private:
  friend class BlockHandle;
  void AddRef(int32_t id);
  void Release(int32_t id);
  // The idle list: doubly linked through prev_/next_, sentinel num_blocks().
  void LinkIdle(int32_t id);  // at the most recent end
  void UnlinkIdle(int32_t id);

  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;  // a stack: the lowest id is at the back
  std::vector<bool> cached_;
  std::vector<int32_t> prev_, next_;  // idle list links, size num_blocks() + 1
  int32_t num_idle_ = 0;
  int32_t num_cached_ = 0;
  BlockReclaimListener* listener_ = nullptr;
};

}  // namespace beacon

#endif  // BEACON_KV_STORE_BLOCK_POOL_H_
