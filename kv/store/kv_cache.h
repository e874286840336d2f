// Paged KV-cache storage and the per-sequence view of it.
//
// Memory layout, one array per layer for K, one for V, of rows of the shape's
// dtype: f32; bf16 (half the bytes); or q8_0 (dtype.h's blocks of 32: 34
// bytes per 32 elements, ~0.27x f32). The CPU kernels widen bf16 and q8_0 to
// f32 exactly on load (a shift; d * q, exact in f32) and compute in f32:
//   K[layer][block][kv_head][slot_in_block][head_dim]
// plus, per layer, the original token position of every slot:
//   pos[layer][block][kv_head][slot_in_block]   (int32)
// Keys are stored after RoPE, so attention needs no positions; the positions
// serve eviction rules (sinks, recent window, kept prompt) and debugging.
//
// A sequence's slot s lives in block table entry s / block_size at offset
// s % block_size, for every layer and KV head alike: all heads of a sequence
// hold the same number of slots, so one block table serves them even once
// per-head eviction makes different heads keep different tokens.
//
// Thread ownership: the engine thread. Kernels may read and write slot data
// from pool threads inside one engine step.
#ifndef BEACON_KV_STORE_KV_CACHE_H_
#define BEACON_KV_STORE_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/dtype.h"
#include "kv/store/block_pool.h"

namespace beacon {

struct KvCacheShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // token slots per block
  // Element type of K and V: kF32, kBF16 or kQ8_0 (REQUIRES head_dim % 32
  // == 0); a device cache is always bf16.
  DType dtype = DType::kF32;
  // Bytes of one slot's K (or V) row of one head.
  size_t row_bytes() const { return DTypeRowBytes(dtype, head_dim); }
};

// True for the element types a KV cache can hold (f32, bf16, q8_0).
inline bool IsKvDType(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kQ8_0; }

// Where the K/V data of a cache lives. A device cache keeps only the block
// bookkeeping on the host (pool, block tables, slot counts); its data is
// owned by a KvDeviceStorage that the device backend attaches.
enum class KvStorage { kHost, kDevice };

class SequenceKv;
class KvPolicy;
struct KvPolicyOptions;
struct Protection;

// The device side of a KvCache (engine/cuda/ implements it): owns the device
// arrays and runs what must touch them, i.e. eviction.
class KvDeviceStorage {
 public:
  virtual ~KvDeviceStorage() = default;
  // Scores every (layer, KV head) of `seq` with `policy`, keeps `n_keep`
  // slots per head under `protection` (kv/policy/selection.h's rule) and compacts
  // them to the front in order, on the device. The caller then truncates.
  // Errors: UNIMPLEMENTED for a policy the device cannot run, INTERNAL for
  // a device failure; the slots are then unchanged.
  virtual absl::Status Evict(SequenceKv* seq, KvPolicy* policy, const KvPolicyOptions& options,
                             const Protection& protection, int32_t n_keep, int32_t next_position) = 0;
};

class KvCache {
 public:
  // Allocates num_blocks blocks of storage up front (host storage), or only
  // the bookkeeping (kDevice: data comes with set_device_storage).
  KvCache(const KvCacheShape& shape, int32_t num_blocks, KvStorage storage = KvStorage::kHost);
  ~KvCache();

  KvStorage storage() const { return storage_; }
  // Null for host caches.
  KvDeviceStorage* device_storage() const { return device_.get(); }
  void set_device_storage(std::unique_ptr<KvDeviceStorage> d) { device_ = std::move(d); }

  const KvCacheShape& shape() const { return shape_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  DType dtype() const { return shape_.dtype; }
  // Elements between the same (head, slot) of consecutive block ids.
  size_t block_stride() const { return block_stride_; }
  // Start of [slot_in_block][head_dim] of (layer, block, kv_head).
  // REQUIRES storage() == kHost (K, V, their typed forms and Positions);
  // K and V REQUIRE dtype() == kF32, KBf16 and VBf16 dtype() == kBF16.
  float* K(int layer, int32_t block, int head) { return F32(k_[layer]) + Offset(block, head); }
  float* V(int layer, int32_t block, int head) { return F32(v_[layer]) + Offset(block, head); }
  const float* K(int layer, int32_t block, int head) const { return F32(k_[layer]) + Offset(block, head); }
  const float* V(int layer, int32_t block, int head) const { return F32(v_[layer]) + Offset(block, head); }
  uint16_t* KBf16(int layer, int32_t block, int head) { return Bf16(k_[layer]) + Offset(block, head); }
  uint16_t* VBf16(int layer, int32_t block, int head) { return Bf16(v_[layer]) + Offset(block, head); }
  const uint16_t* KBf16(int layer, int32_t block, int head) const { return Bf16(k_[layer]) + Offset(block, head); }
  const uint16_t* VBf16(int layer, int32_t block, int head) const { return Bf16(v_[layer]) + Offset(block, head); }
  // Any type: the first row's address (its first byte).
  void* KData(int layer, int32_t block, int head) { return Bytes(k_[layer], block, head); }
  void* VData(int layer, int32_t block, int head) { return Bytes(v_[layer], block, head); }
  const void* KData(int layer, int32_t block, int head) const { return Bytes(k_[layer], block, head); }
  const void* VData(int layer, int32_t block, int head) const { return Bytes(v_[layer], block, head); }
  int32_t* Positions(int layer, int32_t block, int head) {
    return pos_[layer].data() + (static_cast<size_t>(block) * shape_.n_kv_heads + head) * shape_.block_size;
  }
  const int32_t* Positions(int layer, int32_t block, int head) const {
    return pos_[layer].data() + (static_cast<size_t>(block) * shape_.n_kv_heads + head) * shape_.block_size;
  }

  // Bytes of K+V storage per block (all layers), and per token slot.
  size_t BytesPerBlock() const;
  size_t BytesPerToken() const { return BytesPerBlock() / shape_.block_size; }

 private:
  // Storage of one layer's K or V: 64-byte aligned, dtype elements.
  struct Array {
    struct Free {
      void operator()(uint8_t* p) const;
    };
    std::unique_ptr<uint8_t[], Free> bytes;
  };
  size_t Offset(int32_t block, int head) const {
    return static_cast<size_t>(block) * block_stride_ + static_cast<size_t>(head) * shape_.block_size * shape_.head_dim;
  }
  float* F32(const Array& a) const;
  uint16_t* Bf16(const Array& a) const;
  uint8_t* Bytes(const Array& a, int32_t block, int head) const {
    return a.bytes.get() + DTypeRowBytes(shape_.dtype, static_cast<int64_t>(Offset(block, head)));
  }

  KvCacheShape shape_;
  KvStorage storage_;
  size_t block_stride_;
  std::vector<Array> k_, v_;
  std::vector<std::vector<int32_t>> pos_;
  std::unique_ptr<KvDeviceStorage> device_;
  BlockPool pool_;  // declared last: destroyed first, after all sequences
};

// One sequence's slots in a KvCache: its block table and slot count.
class SequenceKv {
 public:
  explicit SequenceKv(KvCache* cache) : cache_(cache) {}
  SequenceKv(SequenceKv&&) = default;
  SequenceKv& operator=(SequenceKv&&) = default;

  // Makes room for `n_slots` slots in total, allocating blocks as needed (all
  // or nothing). RESOURCE_EXHAUSTED when the pool has too few free blocks.
  absl::Status Reserve(int32_t n_slots);
  // Records that slots [num_slots, n) now hold data. REQUIRES n <= capacity.
  void CommitSlots(int32_t n);
  // Shrinks to `n` slots and returns the blocks no longer needed.
  void Truncate(int32_t n);
  // Returns every block (finish / abort / preemption).
  void Release();
  // Starts this (empty) sequence on the first `n_slots` slots of `src`, by
  // reference: their blocks are shared (refcount + 1), not copied, so they
  // must never be written again by either sequence; both append past them
  // into blocks of their own. REQUIRES num_blocks() == 0, n_slots a
  // multiple of the block size, n_slots <= src.num_slots(), the same cache.
  void ShareFrom(const SequenceKv& src, int32_t n_slots);
  // Starts this (empty) sequence on `blocks` taken from the prefix cache
  // (kv/serving/prefix_cache.h), full of tokens: the same contract as ShareFrom.
  // REQUIRES num_blocks() == 0, blocks of this cache's pool.
  void AdoptBlocks(std::vector<BlockHandle> blocks);

  int32_t num_slots() const { return num_slots_; }
  int32_t capacity() const { return static_cast<int32_t>(blocks_.size()) * cache_->shape().block_size; }
  int32_t peak_slots() const { return peak_slots_; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Leading blocks taken by reference (ShareFrom, AdoptBlocks); the rest
  // this sequence allocated itself.
  int32_t shared_blocks() const { return shared_blocks_; }
  int32_t own_blocks() const { return num_blocks() - shared_blocks_; }
  const std::vector<int32_t>& block_ids() const { return block_ids_; }
  KvCache* cache() const { return cache_; }

 private:
  KvCache* cache_;
  std::vector<BlockHandle> blocks_;
  std::vector<int32_t> block_ids_;  // blocks_[i].id(), contiguous for kernels
  int32_t num_slots_ = 0;
  int32_t peak_slots_ = 0;
  int32_t shared_blocks_ = 0;
};

}  // namespace beacon

#endif  // BEACON_KV_STORE_KV_CACHE_H_
