// FlashInfer's decode over our paged cache: the public entry points of
// decode.h, and its CUDA-core kernel (the batch decode kernel) here; the
// tensor-core kernel is in decode_tensor_cores.cu. Only FlashInfer's header
// templates are used, instantiated for bf16, int32 indices and head_dim 64
// and 128 (dispatch.cuh), and FlashInfer's own GQA groups.
#include <algorithm>
#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <vector>

#include "kernels/flashinfer/decode.h"
#include "kernels/flashinfer/decode_tensor_cores.h"
#include "kernels/flashinfer/dispatch.cuh"

namespace beacon {
namespace {

using namespace flashinfer_impl;  // NOLINT: the shared FlashInfer types
using Params = fi::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int32_t>;
constexpr int kPlanEntries = 10;  // DecodePlanInfo::ToVector

bool GroupSupported(int g) { return g == 1 || g == 2 || g == 3 || g == 4 || g == 6 || g == 8 || g == 16; }

// f(head_dim, group), both compile-time constants; cudaErrorInvalidValue for
// a group outside FlashInfer's decode dispatch.
template <typename F>
cudaError_t ByShape(int head_dim, int group, F&& f) {
  return ByHeadDim(head_dim, [&](auto d) -> cudaError_t {
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
  });
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
  if (v.size() != kPlanEntries) return cudaErrorInvalidValue;
  plan->kernel = FlashInferKernel::kCudaCores;
  plan->n = kPlanEntries;
  std::copy(v.begin(), v.end(), plan->v);
  return cudaSuccess;
}

// The work items of a plan of up to max_batch sequences: its padded batch
// is max_grid / n_kv_heads when it splits (only when batch * n_kv_heads <
// max_grid, the kernel's occupancy times the SMs), and only then does it
// store partial outputs; the batch otherwise. The estimate is FlashInfer's
// own, on one page a sequence (the grid does not depend on the lengths).
template <uint32_t D, uint32_t G>
cudaError_t WorkItems(int max_batch, int n_q_heads, int page_size, size_t* split_items, size_t* items) {
  auto estimate = fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<G, D, kPos, Variant, Params>;
  std::vector<int32_t> indptr(max_batch + 1);
  for (int b = 0; b <= max_batch; ++b) indptr[b] = b;
  bool split_kv = false;
  uint32_t max_grid = 0, chunk_pages = 0, new_batch = 0, gdy = 0;
  const cudaError_t err = estimate(split_kv, max_grid, chunk_pages, new_batch, gdy, max_batch, indptr.data(), n_q_heads,
                                   page_size, /*enable_cuda_graph=*/true, nullptr);
  if (err != cudaSuccess) return err;
  *split_items = gdy == 0 ? 0 : max_grid / gdy;
  *items = std::max<size_t>(max_batch, *split_items);
  return cudaSuccess;
}

bool ShapeOk(FlashInferKernel kernel, int batch, int n_q_heads, int n_kv_heads, int head_dim, int page_size) {
  return batch >= 1 && page_size >= 1 && FlashInferDecodeSupports(kernel, n_q_heads, n_kv_heads, head_dim);
}

cudaError_t CudaCoreLaunch(const PagedAttentionParams& p, const FlashInferPages& pages,
                           const FlashInferDecodePlan& plan, const FlashInferDecodeWorkspace& ws, KernelStream stream) {
  if (plan.n != kPlanEntries) return cudaErrorInvalidValue;
  fi::DecodePlanInfo info;
  info.FromVector(std::vector<int64_t>(plan.v, plan.v + kPlanEntries));
  return ByHeadDim(p.kv.layout.head_dim, [&](auto d) -> cudaError_t {
    constexpr uint32_t D = decltype(d)::value;
    Params params(const_cast<__nv_bfloat16*>(p.q), /*q_rope_offset=*/nullptr,
                  PagesOf(p, pages.indptr, pages.indices, pages.last_page_len), p.out, /*lse=*/nullptr,
                  /*maybe_alibi_slopes=*/nullptr, p.n_q_heads, static_cast<int32_t>(p.q_token_stride),
                  /*q_stride_h=*/static_cast<int32_t>(D), /*window_left=*/-1, /*logits_soft_cap=*/0.0f, p.scale,
                  /*rope_scale=*/1.0f, /*rope_theta=*/1e4f);
    __nv_bfloat16* tmp_v;
    float* tmp_s;
    if (cudaError_t e = BindWorkList(info, ws, &params, &tmp_v, &tmp_s); e != cudaSuccess) return e;
    return fi::BatchDecodeWithPagedKVCacheDispatched<D, kPos, Variant>(params, tmp_v, tmp_s, stream.programmatic,
                                                                       stream.stream);
  });
}

}  // namespace

bool FlashInferDecodeSupports(FlashInferKernel kernel, int n_q_heads, int n_kv_heads, int head_dim) {
  if (kernel == FlashInferKernel::kTensorCores) {
    return flashinfer_impl::TensorCoreSupports(n_q_heads, n_kv_heads, head_dim);
  }
  if (n_kv_heads <= 0 || n_q_heads <= 0 || n_q_heads % n_kv_heads != 0) return false;
  return (head_dim == 64 || head_dim == 128) && GroupSupported(n_q_heads / n_kv_heads);
}

cudaError_t FlashInferDecodeWorkspaceBytes(FlashInferKernel kernel, int max_batch, int n_q_heads, int n_kv_heads,
                                           int head_dim, int page_size, size_t* float_bytes, size_t* int_bytes) {
  if (float_bytes == nullptr || int_bytes == nullptr ||
      !ShapeOk(kernel, max_batch, n_q_heads, n_kv_heads, head_dim, page_size)) {
    return cudaErrorInvalidValue;
  }
  if (kernel == FlashInferKernel::kTensorCores) {
    return TensorCoreWorkspaceBytes(max_batch, n_q_heads, n_kv_heads, head_dim, float_bytes, int_bytes);
  }
  size_t split_items = 0, items = 0;
  const cudaError_t err = ByShape(head_dim, n_q_heads / n_kv_heads, [&](auto d, auto g) {
    return WorkItems<decltype(d)::value, decltype(g)::value>(max_batch, n_q_heads, page_size, &split_items, &items);
  });
  if (err != cudaSuccess) return err;
  // DecodePlan's layout (16-byte aligned arrays): partial outputs (sized as
  // fp32, stored as bf16) and their log-sum-exps, for a split plan only;
  // request and tile indices, the output offsets, the chunk size and the
  // valid-block mask.
  *float_bytes = n_q_heads * split_items * head_dim * sizeof(float) + n_q_heads * split_items * sizeof(float) + 2 * 16;
  *int_bytes = 2 * items * sizeof(int32_t) + (items + 1) * sizeof(int32_t) + sizeof(int32_t) + items + 5 * 16;
  return cudaSuccess;
}

cudaError_t FlashInferDecodePlanStep(FlashInferKernel kernel, const int32_t* indptr_host, int batch, int n_q_heads,
                                     int n_kv_heads, int head_dim, int page_size, const FlashInferDecodeWorkspace& ws,
                                     FlashInferDecodePlan* plan, cudaStream_t stream) {
  if (indptr_host == nullptr || plan == nullptr || ws.int_dev == nullptr || ws.int_host == nullptr ||
      !ShapeOk(kernel, batch, n_q_heads, n_kv_heads, head_dim, page_size)) {
    return cudaErrorInvalidValue;
  }
  if (kernel == FlashInferKernel::kTensorCores) {
    return TensorCorePlan(indptr_host, batch, n_q_heads, n_kv_heads, head_dim, page_size, ws, plan, stream);
  }
  return ByShape(head_dim, n_q_heads / n_kv_heads, [&](auto d, auto g) {
    return Plan<decltype(d)::value, decltype(g)::value>(indptr_host, batch, n_q_heads, page_size, ws, plan, stream);
  });
}

cudaError_t LaunchFlashInferDecode(const PagedAttentionParams& p, const FlashInferPages& pages,
                                   const FlashInferDecodePlan& plan, const FlashInferDecodeWorkspace& ws,
                                   KernelStream stream) {
  const PagedKvLayout& L = p.kv.layout;
  if (!PagedAttentionParamsValid(p)) return cudaErrorInvalidValue;
  if (p.n_tokens == 0) return cudaSuccess;
  if (pages.indptr == nullptr || pages.indices == nullptr || pages.last_page_len == nullptr || ws.int_dev == nullptr ||
      plan.padded_batch_size() <= 0 ||
      !ShapeOk(plan.kernel, static_cast<int>(p.n_tokens), p.n_q_heads, L.n_kv_heads, L.head_dim, L.block_size)) {
    return cudaErrorInvalidValue;
  }
  if (plan.kernel == FlashInferKernel::kTensorCores) return TensorCoreLaunch(p, pages, plan, ws, stream);
  return CudaCoreLaunch(p, pages, plan, ws, stream);
}

}  // namespace beacon
