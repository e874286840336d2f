// The paged KV cache as the CUDA kernels see it: the device twin of
// kv/store/kv_cache.h, in bf16.
//
// Memory layout (device pointers; one allocation each for K, V and positions,
// covering every layer):
//   k[layer][block][kv_head][slot_in_block][head_dim]   bf16, keys after RoPE
//   v[layer][block][kv_head][slot_in_block][head_dim]   bf16
//   pos[layer][block][kv_head][slot_in_block]           int32, token position
// Block ids are the host BlockPool's (kv/store/block_pool.h), so one block table
// serves both the host bookkeeping and the device data. A sequence's slot s
// lives in block block_table[s / block_size] at offset s % block_size, for
// every layer and KV head alike.
//
// Block tables travel as one row-major int32 array [n_seqs][stride]; kernels
// index a sequence by its row. Rows past a sequence's last block are unused.
#ifndef BEACON_KERNELS_CUDA_PAGED_KV_H_
#define BEACON_KERNELS_CUDA_PAGED_KV_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace beacon {

struct PagedKvLayout {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  int32_t num_blocks = 0;
  // Explicit padding to 8 bytes, zero: a launch copies the struct whole, and
  // uninitialised padding next to an int can look like a host pointer to the
  // CUDA emulator's argument check (tests/cuda_emu/launch.cc), flakily.
  int32_t pad_ = 0;

  // Elements (bf16 for K/V) of one block of one layer: all its heads.
  __host__ __device__ int64_t block_elems() const { return static_cast<int64_t>(n_kv_heads) * block_size * head_dim; }
  __host__ __device__ int64_t layer_elems() const { return block_elems() * num_blocks; }
  // Index of element 0 of (layer, block, kv_head, slot_in_block) in k / v.
  __host__ __device__ int64_t KvIndex(int layer, int32_t block, int kv_head, int slot_in_block) const {
    return layer * layer_elems() + block * block_elems() +
           (static_cast<int64_t>(kv_head) * block_size + slot_in_block) * head_dim;
  }
  // Index of (layer, block, kv_head, slot_in_block) in pos.
  __host__ __device__ int64_t PosIndex(int layer, int32_t block, int kv_head, int slot_in_block) const {
    return (static_cast<int64_t>(layer) * num_blocks + block) * n_kv_heads * block_size +
           static_cast<int64_t>(kv_head) * block_size + slot_in_block;
  }
};

struct PagedKv {
  __nv_bfloat16* k = nullptr;
  __nv_bfloat16* v = nullptr;
  int32_t* pos = nullptr;
  PagedKvLayout layout;
};

// Block tables of the sequences a kernel touches.
struct BlockTables {
  const int32_t* table = nullptr;  // [n_seqs][stride] block ids
  int stride = 0;                  // >= blocks of the longest sequence
  int32_t pad_ = 0;                // explicit zero padding (see PagedKvLayout::pad_)
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_PAGED_KV_H_
