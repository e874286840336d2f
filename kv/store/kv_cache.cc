#include "kv/store/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>

namespace beacon {

KvCache::KvCache(const KvCacheShape& shape, int32_t num_blocks, KvStorage storage)
    : shape_(shape),
      storage_(storage),
      block_stride_(static_cast<size_t>(shape.n_kv_heads) * shape.block_size * shape.head_dim),
      pool_(num_blocks) {
  assert(IsKvDType(shape.dtype));
  assert(shape.dtype != DType::kQ8_0 || shape.head_dim % kQuantBlock == 0);
  if (storage == KvStorage::kDevice) return;
  // Zeroed (calloc-like): +0.0 in every type (q8_0: d = 0, q = 0).
  const size_t bytes =
      std::max<size_t>(64, DTypeRowBytes(shape.dtype, static_cast<int64_t>(block_stride_) * num_blocks));
  auto make = [bytes] {
    Array a;
    a.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    if (a.bytes == nullptr) throw std::bad_alloc();
    std::memset(a.bytes.get(), 0, bytes);
    return a;
  };
  k_.resize(shape.n_layers);
  v_.resize(shape.n_layers);
  pos_.resize(shape.n_layers);
  for (int l = 0; l < shape.n_layers; ++l) {
    k_[l] = make();
    v_[l] = make();
    pos_[l].assign(static_cast<size_t>(num_blocks) * shape.n_kv_heads * shape.block_size, -1);
  }
}

KvCache::~KvCache() = default;

void KvCache::Array::Free::operator()(uint8_t* p) const { std::free(p); }

float* KvCache::F32(const Array& a) const {
  assert(shape_.dtype == DType::kF32);
  return reinterpret_cast<float*>(a.bytes.get());
}

uint16_t* KvCache::Bf16(const Array& a) const {
  assert(shape_.dtype == DType::kBF16);
  return reinterpret_cast<uint16_t*>(a.bytes.get());
}

size_t KvCache::BytesPerBlock() const {
  return 2 * DTypeRowBytes(shape_.dtype, static_cast<int64_t>(block_stride_)) * shape_.n_layers;
}

absl::Status SequenceKv::Reserve(int32_t n_slots) {
  const int32_t bs = cache_->shape().block_size;
  const int32_t need = (n_slots + bs - 1) / bs - num_blocks();
  if (need <= 0) return absl::OkStatus();
  auto got = cache_->pool().Allocate(need);
  if (!got.ok()) return got.status();
  for (BlockHandle& h : *got) {
    block_ids_.push_back(h.id());
    blocks_.push_back(std::move(h));
  }
  return absl::OkStatus();
}

void SequenceKv::CommitSlots(int32_t n) {
  assert(n <= capacity());
  num_slots_ = n;
  peak_slots_ = std::max(peak_slots_, n);
}

void SequenceKv::Truncate(int32_t n) {
  const int32_t bs = cache_->shape().block_size;
  num_slots_ = std::min(num_slots_, n);
  const int32_t keep_blocks = (num_slots_ + bs - 1) / bs;
  blocks_.resize(keep_blocks);  // handles past the end return their blocks
  block_ids_.resize(keep_blocks);
  shared_blocks_ = std::min(shared_blocks_, keep_blocks);
}

void SequenceKv::ShareFrom(const SequenceKv& src, int32_t n_slots) {
  const int32_t bs = cache_->shape().block_size;
  assert(num_blocks() == 0 && src.cache_ == cache_ && n_slots % bs == 0 && n_slots <= src.num_slots());
  for (int32_t b = 0; b < n_slots / bs; ++b) {
    blocks_.push_back(src.blocks_[b].Share());
    block_ids_.push_back(src.block_ids_[b]);
  }
  num_slots_ = n_slots;
  peak_slots_ = std::max(peak_slots_, n_slots);
  shared_blocks_ = num_blocks();
}

void SequenceKv::AdoptBlocks(std::vector<BlockHandle> blocks) {
  assert(num_blocks() == 0);
  for (BlockHandle& h : blocks) {
    block_ids_.push_back(h.id());
    blocks_.push_back(std::move(h));
  }
  num_slots_ = num_blocks() * cache_->shape().block_size;
  peak_slots_ = std::max(peak_slots_, num_slots_);
  shared_blocks_ = num_blocks();
}

void SequenceKv::Release() {
  blocks_.clear();
  block_ids_.clear();
  num_slots_ = 0;
  shared_blocks_ = 0;
}

}  // namespace beacon
