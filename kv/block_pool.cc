#include "kv/block_pool.h"

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

BlockPool::BlockPool(int32_t num_blocks) : refcount_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t id = num_blocks - 1; id >= 0; --id) free_.push_back(id);
}

BlockPool::~BlockPool() { assert(num_free() == num_blocks() && "KV blocks still held at pool destruction"); }

absl::StatusOr<std::vector<BlockHandle>> BlockPool::Allocate(int32_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("cannot allocate %d KV blocks", n));
  if (n > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("KV cache full: %d blocks requested, %d of %d free", n, num_free(), num_blocks()));
  }
  std::vector<BlockHandle> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = free_.back();
    free_.pop_back();
    refcount_[id] = 1;
    out.push_back(BlockHandle(this, id));
  }
  return out;
}

void BlockPool::AddRef(int32_t id) { ++refcount_[id]; }

void BlockPool::Release(int32_t id) {
  assert(refcount_[id] > 0);
  if (--refcount_[id] == 0) free_.push_back(id);
}

}  // namespace beacon
