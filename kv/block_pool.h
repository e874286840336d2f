// A fixed pool of KV-cache blocks with reference counts and RAII handles.
//
// A block is `block_size` token slots of every layer and KV head (see
// kv_cache.h for the memory layout). Sequences own blocks through BlockHandle:
// dropping the handle (finish, abort, preemption, an error path) returns the
// block, so a block cannot leak. Handles can be shared (refcount > 1) for
// prefix sharing; a block is free again when its last handle goes.
//
// Thread ownership: the engine thread only. Not thread-safe.
#ifndef BEACON_KV_BLOCK_POOL_H_
#define BEACON_KV_BLOCK_POOL_H_

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

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  // REQUIRES every handle has been dropped (checked in debug builds).
  ~BlockPool();

  // Takes `n` free blocks, all or none: RESOURCE_EXHAUSTED when fewer than
  // `n` are free. The most recently freed blocks come first (warm in cache);
  // a fresh pool hands out ids in increasing order.
  absl::StatusOr<std::vector<BlockHandle>> Allocate(int32_t n);

  int32_t num_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  int32_t refcount(int32_t id) const { return refcount_[id]; }

 private:
  friend class BlockHandle;
  void AddRef(int32_t id);
  void Release(int32_t id);

  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;  // a stack: the lowest id is at the back
};

}  // namespace beacon

#endif  // BEACON_KV_BLOCK_POOL_H_
