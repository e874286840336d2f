// FlashInfer's tensor-core decode: its batch prefill kernel over our paged
// cache with one query a sequence (decode_tensor_cores.h). The query tile
// packs the group's heads of that query as its rows, so a group of g heads
// fills g of the tile's 16 rows and every K/V row read serves all of them,
// on tensor cores; this is what vLLM and SGLang run for decode at GQA groups
// of 4 and more, and it covers the groups the CUDA-core kernel's dispatch
// does not (R1-Distill-Qwen-7B's 7). Instantiated for a 16-row query tile,
// no mask (one query sees its whole sequence), head_dim 64 and 128.
#include <algorithm>
#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <numeric>
#include <vector>

#include "kernels/flashinfer/decode_tensor_cores.h"
#include "kernels/flashinfer/dispatch.cuh"

namespace beacon::flashinfer_impl {
namespace {

using Params = fi::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int32_t>;
constexpr uint32_t kTileRows = 16;  // FA2DetermineCtaTileQ for a packed query of <= 16 rows
constexpr int kPlanEntries = 15;    // PrefillPlanInfo::ToVector

// The grid of a CUDA-graph plan: max(2 x SMs / KV heads (its split target),
// query tiles + batch - 1 <= 2 x batch).
cudaError_t MaxWorkItems(int max_batch, int n_kv_heads, size_t* items) {
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
  *items = std::max<size_t>(2 * static_cast<size_t>(sms) / n_kv_heads, 2 * static_cast<size_t>(max_batch)) + 1;
  return cudaSuccess;
}

}  // namespace

bool TensorCoreSupports(int n_q_heads, int n_kv_heads, int head_dim) {
  if (n_kv_heads <= 0 || n_q_heads <= 0 || n_q_heads % n_kv_heads != 0) return false;
  return (head_dim == 64 || head_dim == 128) && n_q_heads / n_kv_heads <= static_cast<int>(kTileRows);
}

cudaError_t TensorCoreWorkspaceBytes(int max_batch, int n_q_heads, int n_kv_heads, int head_dim, size_t* float_bytes,
                                     size_t* int_bytes) {
  size_t items = 0;
  if (cudaError_t e = MaxWorkItems(max_batch, n_kv_heads, &items); e != cudaSuccess) return e;
  // PrefillPlan's layout (16-byte aligned arrays): partial outputs (sized as
  // fp32 rows of the tile, stored as bf16) and their log-sum-exps; request,
  // query-tile and KV-tile indices, output offsets, the chunk size, the row
  // count, the merge offsets and the valid-block mask.
  const size_t rows = static_cast<size_t>(n_q_heads) * items * kTileRows;
  *float_bytes = rows * head_dim * sizeof(float) + rows * sizeof(float) + 2 * 16;
  *int_bytes = 3 * items * sizeof(int32_t) + 2 * (static_cast<size_t>(max_batch) + 1) * sizeof(int32_t) +
               2 * sizeof(int32_t) + items + 8 * 16;
  return cudaSuccess;
}

cudaError_t TensorCorePlan(const int32_t* indptr_host, int batch, int n_q_heads, int n_kv_heads, int head_dim,
                           int page_size, const FlashInferDecodeWorkspace& ws, FlashInferDecodePlan* plan,
                           cudaStream_t stream) {
  std::vector<int32_t> qo_indptr(batch + 1);
  std::iota(qo_indptr.begin(), qo_indptr.end(), 0);
  return ByHeadDim(head_dim, [&](auto) -> cudaError_t {
    fi::PrefillPlanInfo info;
    // FlashInfer reads the lengths only; its signature is not const.
    const cudaError_t err = fi::PrefillPlan<int32_t>(
        ws.float_dev, ws.float_bytes, ws.int_dev, ws.int_host, ws.int_bytes, info, qo_indptr.data(),
        const_cast<int32_t*>(indptr_host), /*total_num_rows=*/batch, batch, n_q_heads, n_kv_heads, head_dim, head_dim,
        page_size, /*enable_cuda_graph=*/true, sizeof(__nv_bfloat16), /*window_left=*/-1,
        /*fixed_split_size=*/-1, /*disable_split_kv=*/false, /*num_colocated_ctas=*/0, stream);
    if (err != cudaSuccess) return err;
    if (info.cta_tile_q != kTileRows) return cudaErrorInvalidValue;  // only the 16-row tile is built
    const std::vector<int64_t> v = info.ToVector();
    if (v.size() != kPlanEntries) return cudaErrorInvalidValue;
    plan->kernel = FlashInferKernel::kTensorCores;
    plan->n = kPlanEntries;
    std::copy(v.begin(), v.end(), plan->v);
    return cudaSuccess;
  });
}

cudaError_t TensorCoreLaunch(const PagedAttentionParams& p, const FlashInferPages& pages,
                             const FlashInferDecodePlan& plan, const FlashInferDecodeWorkspace& ws,
                             KernelStream stream) {
  if (plan.n != kPlanEntries || pages.qo_indptr == nullptr) return cudaErrorInvalidValue;
  fi::PrefillPlanInfo info;
  info.FromVector(std::vector<int64_t>(plan.v, plan.v + kPlanEntries));
  return ByHeadDim(p.kv.layout.head_dim, [&](auto d) -> cudaError_t {
    constexpr uint32_t D = decltype(d)::value;
    Params params;
    params.q = const_cast<__nv_bfloat16*>(p.q);
    params.paged_kv = PagesOf(p, pages.indptr, pages.indices, pages.last_page_len);
    params.q_indptr = const_cast<int32_t*>(pages.qo_indptr);
    params.o = p.out;
    params.num_qo_heads = p.n_q_heads;
    params.group_size = fi::uint_fastdiv(p.n_q_heads / p.kv.layout.n_kv_heads);
    params.q_stride_n = static_cast<int32_t>(p.q_token_stride);
    params.q_stride_h = static_cast<int32_t>(D);
    params.window_left = -1;
    params.logits_soft_cap = 0.0f;
    params.sm_scale = p.scale;
    params.rope_rcp_scale = 1.0f;
    params.rope_rcp_theta = 1.0f / 1e4f;
    __nv_bfloat16* tmp_v;
    float* tmp_s;
    if (cudaError_t e = BindWorkList(info, ws, &params, &tmp_v, &tmp_s); e != cudaSuccess) return e;
    params.qo_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.qo_tile_indices_offset);
    if (info.split_kv) params.merge_indptr = fi::GetPtrFromBaseOffset<int32_t>(ws.int_dev, info.merge_indptr_offset);
    params.max_total_num_rows = static_cast<uint32_t>(info.total_num_rows);
    params.total_num_rows = fi::GetPtrFromBaseOffset<uint32_t>(ws.int_dev, info.total_num_rows_offset);
    return fi::BatchPrefillWithPagedKVCacheDispatched<kTileRows, D, D, kPos, /*USE_FP16_QK_REDUCTION=*/false,
                                                      fi::MaskMode::kNone, Variant>(params, tmp_v, tmp_s,
                                                                                    stream.programmatic, stream.stream);
  });
}

}  // namespace beacon::flashinfer_impl
