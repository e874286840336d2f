#include "engine/cuda/device_kv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cuda/beacon_device_state.h"
#include "kernels/cuda/beacon_state.h"
#include "kernels/cuda/kv_compact.h"
#include "kernels/cuda/kv_select.h"
#include "kv/policy/selection.h"

namespace beacon {
namespace {

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

// The K (or V) array and the positions array of a pool, each 256-byte aligned.
struct PoolArrays {
  size_t kv_bytes, pos_bytes;
};
PoolArrays ArraysOf(const KvCacheShape& shape, int64_t num_blocks) {
  const size_t slots = static_cast<size_t>(shape.n_layers) * num_blocks * shape.n_kv_heads * shape.block_size;
  return {Align256(slots * shape.head_dim * sizeof(__nv_bfloat16)), Align256(slots * sizeof(int32_t))};
}

}  // namespace

size_t DeviceKvStorage::BytesFor(const KvCacheShape& shape, int64_t num_blocks) {
  const PoolArrays a = ArraysOf(shape, num_blocks);
  return 2 * a.kv_bytes + a.pos_bytes;
}

absl::StatusOr<std::unique_ptr<DeviceKvStorage>> DeviceKvStorage::Create(const KvCacheShape& shape, int32_t num_blocks,
                                                                         const EvictContext* context) {
  auto s = std::unique_ptr<DeviceKvStorage>(new DeviceKvStorage());
  s->context_ = context;
  PagedKvLayout& l = s->paged_.layout;
  l.n_layers = shape.n_layers;
  l.n_kv_heads = shape.n_kv_heads;
  l.head_dim = shape.head_dim;
  l.block_size = shape.block_size;
  l.num_blocks = num_blocks;
  const PoolArrays arrays = ArraysOf(shape, num_blocks);
  const size_t kv_bytes = arrays.kv_bytes, pos_bytes = arrays.pos_bytes;
  if (absl::Status st = s->memory_.Allocate(BytesFor(shape, num_blocks), "the KV cache pool"); !st.ok()) return st;
  char* base = s->memory_.as<char>();
  s->paged_.k = reinterpret_cast<__nv_bfloat16*>(base);
  s->paged_.v = reinterpret_cast<__nv_bfloat16*>(base + kv_bytes);
  s->paged_.pos = reinterpret_cast<int32_t*>(base + 2 * kv_bytes);
  // Positions start at -1 as on the host (a slot never written reads as no token).
  // On the backend's stream: a cudaMemset would run on the legacy default
  // stream, which the (non-blocking) stream of the kernels does not wait for.
  BEACON_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->paged_.pos, 0xFF, pos_bytes, context->stream));
  return s;
}

absl::Status DeviceKvStorage::Evict(SequenceKv* seq, KvPolicy* policy, const KvPolicyOptions& options,
                                    const Protection& protection, int32_t n_keep, int32_t next_position) {
  if (options.policy != KvPolicyKind::kBeacon || options.beacon_filter != BeaconFilter::kAll) {
    return absl::UnimplementedError(absl::StrCat("KV policy \"", std::string(options.policy_name()),
                                                 "\" cannot evict on the CUDA backend (beacon with filter all can)"));
  }
  const EvictContext& ctx = *context_;
  absl::StatusOr<BeaconDeviceState*> state = BeaconStateOf(policy, ctx.model, ctx.stream, ctx.beacon_pool);
  if (!state.ok()) return state.status();
  const BeaconDims& dims = (*state)->dims();
  const int32_t n = seq->num_slots();

  // Scratch: [block table][scores][keep][score workspace][select workspace]
  // (BeaconEvictScratchLayout, offsets for this n), from the reservation
  // when it covers n slots of these dims (sized by BytesForAtMost).
  const BeaconEvictScratchLayout lay = BeaconEvictScratchLayout::For(dims, n, paged_.layout.block_size);
  EvictScratch* reserved = ctx.scratch.get();
  char* at = nullptr;
  if (reserved != nullptr && reserved->dims == dims && n <= reserved->max_slots &&
      reserved->block_size <= paged_.layout.block_size && lay.total_bytes <= reserved->memory.bytes()) {
    at = reserved->memory.as<char>();
  } else {
    if (lay.total_bytes > own_scratch_.bytes()) {
      if (absl::Status st = own_scratch_.Allocate(lay.total_bytes, "eviction scratch"); !st.ok()) return st;
      ++own_scratch_allocations_;
    }
    at = own_scratch_.as<char>();
  }
  int32_t* table = reinterpret_cast<int32_t*>(at + lay.table);
  float* scores = reinterpret_cast<float*>(at + lay.scores);
  int32_t* keep = reinterpret_cast<int32_t*>(at + lay.keep);
  void* score_workspace = at + lay.score_workspace;
  void* select_workspace = at + lay.select_workspace;
  const size_t select_ws = lay.total_bytes - lay.select_workspace;

  cudaStream_t stream = ctx.stream;
  // The blocks of slots [0, n) only (the table region holds ceil(n / bs)
  // entries; a sequence may hold blocks reserved past its slots).
  const int32_t bs = paged_.layout.block_size;
  const size_t table_blocks = std::min(seq->block_ids().size(), static_cast<size_t>((n + bs - 1) / bs));
  BEACON_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(table, seq->block_ids().data(), table_blocks * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  BEACON_CUDA_RETURN_IF_ERROR(LaunchBeaconScore(dims, (*state)->data(), (*state)->ring_count(), paged_, table, n,
                                                next_position, ctx.rope, options.pool_kernel, scores, score_workspace,
                                                stream, ctx.score_kernel));
  DeviceProtection prot{};
  prot.prompt_len = protection.prompt_len;
  prot.sinks = protection.sinks;
  prot.window = protection.window;
  prot.keep_prompt = protection.keep_prompt;
  BEACON_CUDA_RETURN_IF_ERROR(
      LaunchSelectKeep(scores, paged_, table, n, prot, n_keep, keep, select_workspace, select_ws, stream));
  BEACON_CUDA_RETURN_IF_ERROR(LaunchCompact(paged_, table, keep, n_keep, n, stream));
  BEACON_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace beacon
