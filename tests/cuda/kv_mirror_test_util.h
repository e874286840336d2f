// A host KvCache (f32, kv/store/kv_cache.h) and its device twin (bf16 K/V, int32
// positions, kernels/cuda/paged_kv.h) holding the same values at the same
// block ids, for the KV kernel tests (beacon score, select, compact): the CPU
// reference runs on `cache`, the kernel on `Device()`.
//
// Values are bf16 bit patterns on both sides (the host cache stores their
// exact f32 widening), so a bit-exact kernel reproduces the host result
// exactly after Fp32ToBf16.
#ifndef BEACON_TESTS_CUDA_KV_MIRROR_TEST_UTIL_H_
#define BEACON_TESTS_CUDA_KV_MIRROR_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cuda/paged_kv.h"
#include "kv/store/kv_cache.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon::cuda_test {

class KvMirror {
 public:
  KvMirror(const KvCacheShape& shape, int32_t num_blocks)
      : shape_(shape),
        cache_(std::make_unique<KvCache>(shape, num_blocks)),
        dk_(Elems(shape, num_blocks)),
        dv_(Elems(shape, num_blocks)),
        dpos_(static_cast<size_t>(shape.n_layers) * num_blocks * shape.n_kv_heads * shape.block_size) {
    layout_.n_layers = shape.n_layers;
    layout_.n_kv_heads = shape.n_kv_heads;
    layout_.head_dim = shape.head_dim;
    layout_.block_size = shape.block_size;
    layout_.num_blocks = num_blocks;
    k_.assign(dk_.size(), 0);
    v_.assign(dv_.size(), 0);
    pos_.assign(dpos_.size(), 0);
  }

  KvCache* cache() { return cache_.get(); }
  const PagedKvLayout& layout() const { return layout_; }
  cudaError_t status() const {
    if (dk_.status() != cudaSuccess) return dk_.status();
    if (dv_.status() != cudaSuccess) return dv_.status();
    return dpos_.status();
  }
  PagedKv Device() const {
    PagedKv kv;
    kv.k = reinterpret_cast<__nv_bfloat16*>(dk_.get());
    kv.v = reinterpret_cast<__nv_bfloat16*>(dv_.get());
    kv.pos = dpos_.get();
    kv.layout = layout_;
    return kv;
  }

  // Host copies in the device layout.
  const std::vector<uint16_t>& k() const { return k_; }
  const std::vector<uint16_t>& v() const { return v_; }
  const std::vector<int32_t>& pos() const { return pos_; }

  void SetKey(int layer, int32_t block, int head, int slot, int c, uint16_t bits) {
    k_[layout_.KvIndex(layer, block, head, slot) + c] = bits;
    cache_->K(layer, block, head)[slot * shape_.head_dim + c] = Bf16ToFp32(bits);
  }
  void SetValue(int layer, int32_t block, int head, int slot, int c, uint16_t bits) {
    v_[layout_.KvIndex(layer, block, head, slot) + c] = bits;
    cache_->V(layer, block, head)[slot * shape_.head_dim + c] = Bf16ToFp32(bits);
  }
  void SetPos(int layer, int32_t block, int head, int slot, int32_t p) {
    pos_[layout_.PosIndex(layer, block, head, slot)] = p;
    cache_->Positions(layer, block, head)[slot] = p;
  }

  // Every block of every layer and head: K ~ N(0, key_std), V ~ N(0, 1),
  // positions uniform in [0, 1e6).
  // Keys N(0, key_std^2), values N(0, 1), positions uniform in [0, max_pos].
  void FillRandom(uint64_t seed, float key_std, int32_t max_pos = 999999) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int32_t> any_pos(0, max_pos);
    for (int l = 0; l < shape_.n_layers; ++l)
      for (int32_t b = 0; b < layout_.num_blocks; ++b)
        for (int h = 0; h < shape_.n_kv_heads; ++h)
          for (int s = 0; s < shape_.block_size; ++s) {
            for (int c = 0; c < shape_.head_dim; ++c) {
              SetKey(l, b, h, s, c, Fp32ToBf16(key_std * normal(rng)));
              SetValue(l, b, h, s, c, Fp32ToBf16(normal(rng)));
            }
            SetPos(l, b, h, s, any_pos(rng));
          }
  }

  cudaError_t Upload() {
    cudaError_t e = dk_.Upload(k_);
    if (e == cudaSuccess) e = dv_.Upload(v_);
    if (e == cudaSuccess) e = dpos_.Upload(pos_);
    return e;
  }
  cudaError_t Download(std::vector<uint16_t>* k, std::vector<uint16_t>* v, std::vector<int32_t>* pos) const {
    cudaError_t e = dk_.Download(k);
    if (e == cudaSuccess) e = dv_.Download(v);
    if (e == cudaSuccess) e = dpos_.Download(pos);
    return e;
  }

 private:
  static size_t Elems(const KvCacheShape& s, int32_t num_blocks) {
    return static_cast<size_t>(s.n_layers) * num_blocks * s.n_kv_heads * s.block_size * s.head_dim;
  }

  KvCacheShape shape_;
  PagedKvLayout layout_;
  std::unique_ptr<KvCache> cache_;
  std::vector<uint16_t> k_, v_;
  std::vector<int32_t> pos_;
  DeviceBuffer<uint16_t> dk_, dv_;
  DeviceBuffer<int32_t> dpos_;
};

// Reserves `n_slots` for `seq` and as many for `other`, a block at a time in
// turn, so seq's block table is not contiguous (even ids) and other's blocks
// sit between its blocks; commits seq's slots.
inline void ReserveInterleaved(int32_t n_slots, int block_size, SequenceKv* seq, SequenceKv* other) {
  for (int32_t n = 0; n < n_slots;) {
    n += block_size;
    ASSERT_TRUE(seq->Reserve(n).ok());
    ASSERT_TRUE(other->Reserve(n).ok());
  }
  seq->CommitSlots(n_slots);
}

}  // namespace beacon::cuda_test

#endif  // BEACON_TESTS_CUDA_KV_MIRROR_TEST_UTIL_H_
