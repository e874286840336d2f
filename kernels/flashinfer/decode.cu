// FlashInfer's batch decode over our paged cache: the plan and the launch
// (decode.h says what each needs). Only FlashInfer's header templates are
// used, instantiated here for bf16 Q/K/V/O, int32 indices, no positional
// encoding in the kernel (keys are cached after RoPE), no sliding window,
// soft cap, ALiBi or custom mask, head_dim 64 and 128, and FlashInfer's own
// GQA groups.
#include <algorithm>
#include <exception>
#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>
#include <type_traits>
#include <vector>

#include "kernels/flashinfer/decode.h"

namespace beacon {
namespace {

namespace fi = flashinfer;
using Params = fi::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int32_t>;
using Variant = fi::DefaultAttention</*use_custom_mask=*/false, /*use_sliding_window=*/false,
                                     /*use_logits_soft_cap=*/false, /*use_alibi=*/false>;
constexpr fi::PosEncodingMode kPos = fi::PosEncodingMode::kNone;

template <uint32_t V>
using U32 = std::integral_constant<uint32_t, V>;

bool GroupSupported(int g) { return g == 1 || g == 2 || g == 3 || g == 4 || g == 6 || g == 8 || g == 16; }

// f(head_dim, group) with both as compile-time constants (the set
// FlashInferDecodeSupports admits); cudaErrorInvalidValue for any other.
// FlashInfer reports its own failures by exception (FLASHINFER_ERROR, e.g. a
// workspace too small for the plan): they become cudaErrorInvalidValue here,
// so nothing throws across our interfaces.
template <typename F>
cudaError_t Dispatch(int head_dim, int group, F&& f) {
  auto by_group = [&](auto d) -> cudaError_t {
    switch (group) {
      case 1: return f(d, U32<1>{});
      case 2: return f(d, U32<2>{});
      case 3: return f(d, U32<3>{});
      case 4: return f(d, U32<4>{});
      case 6: return f(d, U32<6>{});
      case 8: return f(d, U32<8>{});
      case 16: return f(d, U32<16>{});
      default: return cudaErrorInvalidValue;
    }
  };
  try {
    switch (head_dim) {
      case 64: return by_group(U32<64>{});
      case 128: return by_group(U32<128>{});
      default: return cudaErrorInvalidValue;
    }
  } catch (const std::exception&) {
    return cudaErrorInvalidValue;
  }
}

// One step's plan, in FlashInfer's CUDA-graph mode.
template <uint32_t D, uint32_t G>
cudaError_t Plan(const int32_t* indptr_host, int batch, int n_q_heads, int page_size,
                 const FlashInferDecodeWorkspace& ws, FlashInferDecodePlan* plan, cudaStream_t stream) {
  auto estimate = fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<G, D, kPos, Variant, Params>;
  fi::DecodePlanInfo info;
  // FlashInfer reads the lengths only; its signature is not const.
  const cudaError_t err = fi::DecodePlan<D, kPos, Variant, Params>(
      ws.float_dev, ws.float_bytes, ws.int_dev, ws.int_host, ws.int_bytes, info, const_cast<int32_t*>(indptr_host),
      batch, n_q_heads, page_size, /*enable_cuda_graph=*/true, stream, estimate);
  if (err != cudaSuccess) return err;
  const std::vector<int64_t> v = info.ToVector();
  if (v.size() != 10) return cudaErrorInvalidValue;
  for (int i = 0; i < 10; ++i) plan->v[i] = v[i];
  return cudaSuccess;
}

// The most work items a plan of up to max_batch sequences lays out: its
// padded batch is max_grid / n_kv_heads when it splits (only when
// batch * n_kv_heads < max_grid, the kernel's occupancy times the SMs) and
// the batch otherwise. The estimate is FlashInfer's own, on one page a
// sequence (the grid does not depend on the lengths).
template <uint32_t D, uint32_t G>
cudaError_t MaxWorkItems(int max_batch, int n_q_heads, int page_size, size_t* items) {
  auto estimate = fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<G, D, kPos, Variant, Params>;
  std::vector<int32_t> indptr(max_batch + 1);
  for (int b = 0; b <= max_batch; ++b) indptr[b] = b;
  bool split_kv = false;
  uint32_t max_grid = 0, chunk_pages = 0, new_batch = 0, gdy = 0;
  const cudaError_t err = estimate(split_kv, max_grid, chunk_pages, new_batch, gdy, max_batch, indptr.data(), n_q_heads,
                                   page_size, /*enable_cuda_graph=*/true, nullptr);
  if (err != cudaSuccess) return err;
  *items = std::max<size_t>(max_batch, gdy == 0 ? 0 : max_grid / gdy);
  return cudaSuccess;
}

bool ShapeOk(int batch, int n_q_heads, int n_kv_heads, int head_dim, int page_size) {
  return batch >= 1 && page_size >= 1 && FlashInferDecodeSupports(n_q_heads, n_kv_heads, head_dim);
}

}  // namespace

bool FlashInferDecodeSupports(int n_q_heads, int n_kv_heads, int head_dim) {
  if (n_kv_heads <= 0 || n_q_heads <= 0 || n_q_heads % n_kv_heads != 0) return false;
  return (head_dim == 64 || head_dim == 128) && GroupSupported(n_q_heads / n_kv_heads);
}

cudaError_t FlashInferDecodeWorkspaceBytes(int max_batch, int n_q_heads, int n_kv_heads, int head_dim, int page_size,
                                           size_t* float_bytes, size_t* int_bytes) {
  if (float_bytes == nullptr || int_bytes == nullptr ||
      !ShapeOk(max_batch, n_q_heads, n_kv_heads, head_dim, page_size)) {
    return cudaErrorInvalidValue;
  }
  size_t items = 0;
  const cudaError_t err = Dispatch(head_dim, n_q_heads / n_kv_heads, [&](auto d, auto g) {
    return MaxWorkItems<decltype(d)::value, decltype(g)::value>(max_batch, n_q_heads, page_size, &items);
  });
  if (err != cudaSuccess) return err;
  // DecodePlan's layout (16-byte aligned arrays): partial outputs (sized as
  // fp32, stored as bf16) and their log-sum-exps; request and tile indices,
  // the output offsets, the chunk size and the valid-block mask.
  *float_bytes = n_q_heads * items * head_dim * sizeof(float) + n_q_heads * items * sizeof(float) + 2 * 16;
  *int_bytes = 2 * items * sizeof(int32_t) + (items + 1) * sizeof(int32_t) + sizeof(int32_t) + items + 5 * 16;
  return cudaSuccess;
}

cudaError_t FlashInferDecodePlanStep(const int32_t* indptr_host, int batch, int n_q_heads, int n_kv_heads, int head_dim,
                                     int page_size, const FlashInferDecodeWorkspace& ws, FlashInferDecodePlan* plan,
                                     cudaStream_t stream) {
  if (indptr_host == nullptr || plan == nullptr || ws.int_dev == nullptr || ws.int_host == nullptr ||
      !ShapeOk(batch, n_q_heads, n_kv_heads, head_dim, page_size)) {
    return cudaErrorInvalidValue;
  }
  return Dispatch(head_dim, n_q_heads / n_kv_heads, [&](auto d, auto g) {
    return Plan<decltype(d)::value, decltype(g)::value>(indptr_host, batch, n_q_heads, page_size, ws, plan, stream);
  });
}

cudaError_t LaunchFlashInferDecode(const PagedAttentionParams& p, const FlashInferPages& pages,
                                   const FlashInferDecodePlan& plan, const FlashInferDecodeWorkspace& ws,
                                   KernelStream stream) {
  const PagedKvLayout& L = p.kv.layout;
  if (!PagedAttentionParamsValid(p) || pages.indptr == nullptr || pages.indices == nullptr ||
      pages.last_page_len == nullptr || ws.int_dev == nullptr || plan.padded_batch_size() <= 0 ||
      !ShapeOk(static_cast<int>(p.n_tokens), p.n_q_heads, L.n_kv_heads, L.head_dim, L.block_size) ||
      (plan.split_kv() && ws.float_dev == nullptr)) {
    return p.n_tokens == 0 && PagedAttentionParamsValid(p) ? cudaSuccess : cudaErrorInvalidValue;
  }
  fi::DecodePlanInfo info;
  info.FromVector(std::vector<int64_t>(plan.v, plan.v + 10));
  return Dispatch(L.head_dim, p.n_q_heads / L.n_kv_heads, [&](auto d, auto) -> cudaError_t {
    constexpr uint32_t D = decltype(d)::value;
    const int64_t layer_offset = static_cast<int64_t>(p.layer) * L.layer_elems();
    // kHND with contiguous pages: page stride n_kv_heads * block_size * D,
    // head stride block_size * D, slot stride D (paged_kv.h).
    fi::paged_kv_t<__nv_bfloat16, int32_t> kv(L.n_kv_heads, L.block_size, D, static_cast<uint32_t>(p.n_tokens),
                                              fi::QKVLayout::kHND, p.kv.k + layer_offset, p.kv.v + layer_offset,
                                              const_cast<int32_t*>(pages.indices), const_cast<int32_t*>(pages.indptr),
                                              const_cast<int32_t*>(pages.last_page_len));
    Params params(const_cast<__nv_bfloat16*>(p.q), /*q_rope_offset=*/nullptr, kv, p.out, /*lse=*/nullptr,
                  /*maybe_alibi_slopes=*/nullptr, p.n_q_heads, static_cast<int32_t>(p.q_token_stride),
                  /*q_stride_h=*/static_cast<int32_t>(D), /*window_left=*/-1, /*logits_soft_cap=*/0.0f, p.scale,
                  /*rope_scale=*/1.0f, /*rope_theta=*/1e4f);
    params.padded_batch_size = static_cast<uint32_t>(info.padded_batch_size);
    params.request_indices = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.request_indices_offset);
    params.kv_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.kv_tile_indices_offset);
    params.o_indptr = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.o_indptr_offset);
    params.kv_chunk_size_ptr = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.kv_chunk_size_ptr_offset);
    __nv_bfloat16* tmp_v = nullptr;
    float* tmp_s = nullptr;
    if (info.split_kv) {
      tmp_v = fi::GetPtrFromBaseOffset<__nv_bfloat16>(ws.float_dev, info.v_offset);
      tmp_s = fi::GetPtrFromBaseOffset<float>(ws.float_dev, info.s_offset);
      params.block_valid_mask = fi::GetPtrFromBaseOffset<bool>(ws.int_dev, info.block_valid_mask_offset);
    }
    return fi::BatchDecodeWithPagedKVCacheDispatched<D, kPos, Variant>(params, tmp_v, tmp_s, stream.programmatic,
                                                                       stream.stream);
  });
}

}  // namespace beacon
