#include "kv/store/block_pool.h"

#include <cassert>

#include "absl/strings/str_format.h"

namespace beacon {

BlockHandle::BlockHandle(BlockHandle&& other) noexcept : pool_(other.pool_), id_(other.id_) {
  other.pool_ = nullptr;
  other.id_ = -1;
}

BlockHandle& BlockHandle::operator=(BlockHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = other.pool_;
    id_ = other.id_;
    other.pool_ = nullptr;
    other.id_ = -1;
  }
  return *this;
}

BlockHandle::~BlockHandle() { Reset(); }

void BlockHandle::Reset() {
  if (pool_ != nullptr) pool_->Release(id_);
  pool_ = nullptr;
  id_ = -1;
}

BlockHandle BlockHandle::Share() const {
  assert(valid());
  pool_->AddRef(id_);
  return BlockHandle(pool_, id_);
}

BlockPool::BlockPool(int32_t num_blocks)
    : refcount_(num_blocks, 0), cached_(num_blocks, false), prev_(num_blocks + 1), next_(num_blocks + 1) {
  free_.reserve(num_blocks);
  for (int32_t id = num_blocks - 1; id >= 0; --id) free_.push_back(id);
  prev_[num_blocks] = next_[num_blocks] = num_blocks;  // the empty idle list
}

BlockPool::~BlockPool() { assert(num_used() == 0 && "KV blocks still held at pool destruction"); }

absl::StatusOr<std::vector<BlockHandle>> BlockPool::Allocate(int32_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("cannot allocate %d KV blocks", n));
  if (n > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("KV cache full: %d blocks requested, %d of %d free", n, num_free(), num_blocks()));
  }
  std::vector<BlockHandle> out;
  out.reserve(n);
  const int32_t sentinel = num_blocks();
  for (int32_t i = 0; i < n; ++i) {
    int32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = next_[sentinel];  // the least recently used idle block
      UnlinkIdle(id);
      cached_[id] = false;
      --num_cached_;
      if (listener_ != nullptr) listener_->OnReclaim(id);
    }
    refcount_[id] = 1;
    out.push_back(BlockHandle(this, id));
  }
  return out;
}

void BlockPool::MarkCached(int32_t id) {
  assert(refcount_[id] > 0 && !cached_[id]);
  cached_[id] = true;
  ++num_cached_;
}

BlockHandle BlockPool::Acquire(int32_t id) {
  assert(cached_[id]);
  if (refcount_[id] == 0) UnlinkIdle(id);
  ++refcount_[id];
  return BlockHandle(this, id);
}

void BlockPool::Uncache(int32_t id) {
  assert(cached_[id]);
  cached_[id] = false;
  --num_cached_;
  if (refcount_[id] == 0) {
    UnlinkIdle(id);
    free_.push_back(id);
  }
}

void BlockPool::LinkIdle(int32_t id) {
  const int32_t sentinel = num_blocks();
  const int32_t last = prev_[sentinel];
  prev_[id] = last;
  next_[id] = sentinel;
  next_[last] = id;
  prev_[sentinel] = id;
  ++num_idle_;
}

void BlockPool::UnlinkIdle(int32_t id) {
  next_[prev_[id]] = next_[id];
  prev_[next_[id]] = prev_[id];
  --num_idle_;
}

void BlockPool::AddRef(int32_t id) { ++refcount_[id]; }

void BlockPool::Release(int32_t id) {
  assert(refcount_[id] > 0);
  if (--refcount_[id] > 0) return;
  if (cached_[id]) {
    LinkIdle(id);
  } else {
    free_.push_back(id);
  }
}

}  // namespace beacon
