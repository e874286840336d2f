// Shared by kernels/flashinfer/decode.cu and decode_tensor_cores.cu: the
// FlashInfer types we instantiate and the compile-time dispatch. Included
// only by those two files (it pulls FlashInfer's headers, which only their
// library target has on its include path).
#ifndef BEACON_KERNELS_FLASHINFER_DISPATCH_CUH_
#define BEACON_KERNELS_FLASHINFER_DISPATCH_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <flashinfer/attention/variants.cuh>
#include <flashinfer/layout.cuh>
#include <flashinfer/page.cuh>
#include <type_traits>

#include "kernels/cuda/paged_attention.h"
#include "kernels/flashinfer/decode.h"

namespace beacon::flashinfer_impl {

namespace fi = flashinfer;
// bf16 everywhere, no soft cap, ALiBi, sliding window or custom mask; keys
// are cached after RoPE, so the kernels apply none.
using Variant = fi::DefaultAttention</*use_custom_mask=*/false, /*use_sliding_window=*/false,
                                     /*use_logits_soft_cap=*/false, /*use_alibi=*/false>;
constexpr fi::PosEncodingMode kPos = fi::PosEncodingMode::kNone;

template <uint32_t V>
using U32 = std::integral_constant<uint32_t, V>;

// f(head_dim) with head_dim a compile-time constant (64 or 128);
// cudaErrorInvalidValue for any other. FlashInfer reports its own failures
// by exception (FLASHINFER_ERROR, e.g. a workspace too small for the plan):
// they become cudaErrorInvalidValue here, so nothing throws across our
// interfaces.
template <typename F>
cudaError_t ByHeadDim(int head_dim, F&& f) {
  try {
    switch (head_dim) {
      case 64: return f(U32<64>{});
      case 128: return f(U32<128>{});
      default: return cudaErrorInvalidValue;
    }
  } catch (const std::exception&) {
    return cudaErrorInvalidValue;
  }
}

// Layer p.layer of our cache as FlashInfer's kHND pages: page stride
// n_kv_heads * block_size * head_dim, head stride block_size * head_dim,
// slot stride head_dim (kernels/cuda/paged_kv.h).
inline fi::paged_kv_t<__nv_bfloat16, int32_t> PagesOf(const PagedAttentionParams& p, const int32_t* indptr,
                                                      const int32_t* indices, const int32_t* last_page_len) {
  const PagedKvLayout& L = p.kv.layout;
  const int64_t layer_offset = static_cast<int64_t>(p.layer) * L.layer_elems();
  // FlashInfer's pointers are not const; it only reads these.
  return fi::paged_kv_t<__nv_bfloat16, int32_t>(
      L.n_kv_heads, L.block_size, L.head_dim, static_cast<uint32_t>(p.n_tokens), fi::QKVLayout::kHND,
      p.kv.k + layer_offset, p.kv.v + layer_offset, const_cast<int32_t*>(indices), const_cast<int32_t*>(indptr),
      const_cast<int32_t*>(last_page_len));
}

// Points `params` at the work list a plan (FlashInfer's DecodePlanInfo or
// PrefillPlanInfo) laid out in the workspaces, the fields both kernels'
// parameters share, and, for a split plan, *tmp_v and *tmp_s at its partial
// outputs (null otherwise). cudaErrorInvalidValue for a split plan without a
// float workspace.
template <typename Params, typename Info>
cudaError_t BindWorkList(const Info& info, const FlashInferDecodeWorkspace& ws, Params* params, __nv_bfloat16** tmp_v,
                         float** tmp_s) {
  params->padded_batch_size = static_cast<uint32_t>(info.padded_batch_size);
  params->request_indices = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.request_indices_offset);
  params->kv_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.kv_tile_indices_offset);
  params->o_indptr = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.o_indptr_offset);
  params->kv_chunk_size_ptr = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.kv_chunk_size_ptr_offset);
  *tmp_v = nullptr;
  *tmp_s = nullptr;
  if (!info.split_kv) return cudaSuccess;
  if (ws.float_dev == nullptr) return cudaErrorInvalidValue;
  *tmp_v = fi::GetPtrFromBaseOffset<__nv_bfloat16>(ws.float_dev, info.v_offset);
  *tmp_s = fi::GetPtrFromBaseOffset<float>(ws.float_dev, info.s_offset);
  params->block_valid_mask = fi::GetPtrFromBaseOffset<bool>(ws.int_dev, info.block_valid_mask_offset);
  return cudaSuccess;
}

}  // namespace beacon::flashinfer_impl

#endif  // BEACON_KERNELS_FLASHINFER_DISPATCH_CUH_
