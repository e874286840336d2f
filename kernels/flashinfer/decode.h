// FlashInfer's decode attention (flashinfer-python 0.6.9's headers, PyPI,
// pinned in tools/bootstrap.sh) over our paged cache: two more decode
// kernels beside kernels/cuda/paged_attention.h's two. Why they are here and
// what they cost: docs/cuda.md, "Decode attention: ours or FlashInfer".
//
// The cache is used in place: a FlashInfer page is our block
// (PagedKvLayout::block_size slots), our per-layer layout
// [block][kv_head][slot][head_dim] is its kHND, and keys are stored after
// RoPE (PosEncodingMode::kNone). What FlashInfer needs that the block tables
// do not say directly is the CSR form of the pages a sequence reads:
//   indptr[b + 1] - indptr[b]   pages of sequence b (ceil(len_b / block_size))
//   indices[indptr[b] + i]      block id of its page i (its block table's prefix)
//   last_page_len[b]            slots used in its last page (1..block_size)
// where len_b = tok_slot[b] + 1: decode token b (one per sequence, in
// sequence order) attends to slots [0, tok_slot[b]], as ours do.
//
// Planning: FlashInfer splits long sequences into KV chunks on the host
// from the lengths (DecodePlan), and writes the work list into an int
// workspace on the device with one cudaMemcpyAsync on the stream. We always
// plan in its CUDA-graph mode: the grid and the workspace layout then depend
// only on the batch size, the heads and the GPU's SM count, so one captured
// graph of the step replays after every new plan (as vLLM replays
// FlashInfer's decode). Plan once per step (the lengths are the same in every
// layer), before the launches that read it; the plan's copy must run before
// them in stream order, and the host buffer must not be reused until it has.
//
// Two kernels (FlashInferKernel), as vLLM and SGLang use them for decode:
//   kCudaCores    its batch decode kernel: GQA groups 1, 2, 3, 4, 6, 8 and 16
//                 (its dispatch), head_dim 64 and 128;
//   kTensorCores  its batch prefill kernel with one query a sequence (the
//                 group's heads packed as the query tile's rows, 16 of them):
//                 any group up to 16, head_dim 64 and 128 (R1-Distill-Qwen-7B's
//                 7 included).
// Other shapes are refused by FlashInferDecodeSupports; the caller keeps our
// kernels for them.
//
// Arithmetic: q . k in fp32 from bf16 (on tensor cores: exact products
// summed in fp32), online softmax in fp32, P V in fp32 (tensor cores: P
// rounded to bf16 first, as our kMma), output rounded to bf16 once; a split
// sequence's partial outputs are stored in bf16 before the merge. Within
// 2 * 2^-9 * max |v| of the exact loop beyond kernels/cuda/paged_attention.h's
// fp32 tolerance (tests/flashinfer/decode_test.cc, on a GPU: the emulator
// cannot run FlashInfer's PTX).
#ifndef BEACON_KERNELS_FLASHINFER_DECODE_H_
#define BEACON_KERNELS_FLASHINFER_DECODE_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_attention.h"

namespace beacon {

enum class FlashInferKernel { kCudaCores, kTensorCores };

// FlashInfer's plan as its ToVector() lists it: DecodePlanInfo (10 entries)
// for kCudaCores, PrefillPlanInfo (15) for kTensorCores; both begin with the
// padded batch size (the grid) and end with the split flag.
struct FlashInferDecodePlan {
  FlashInferKernel kernel = FlashInferKernel::kCudaCores;
  int n = 0;
  int64_t v[15] = {};
  int64_t padded_batch_size() const { return n > 0 ? v[0] : 0; }
  bool split_kv() const { return n > 0 && v[n - 1] != 0; }
};

// Device workspaces of one plan. `int_host` is page-locked host memory of
// int_bytes (the plan is built there and copied to `int_dev`).
struct FlashInferDecodeWorkspace {
  void* float_dev = nullptr;
  size_t float_bytes = 0;
  void* int_dev = nullptr;
  void* int_host = nullptr;
  size_t int_bytes = 0;
};

// The pages of each sequence (device pointers; see the file comment).
struct FlashInferPages {
  const int32_t* indptr = nullptr;         // [batch + 1]
  const int32_t* indices = nullptr;        // [indptr[batch]]
  const int32_t* last_page_len = nullptr;  // [batch]
  const int32_t* qo_indptr = nullptr;      // [batch + 1] = 0, 1, ..., batch (kTensorCores only)
};

bool FlashInferDecodeSupports(FlashInferKernel kernel, int n_q_heads, int n_kv_heads, int head_dim);

// Workspace bytes that a plan of up to max_batch sequences of any lengths
// needs on the current device (its SM count and the kernel's occupancy set
// the split grid). cudaErrorInvalidValue for an unsupported shape or
// max_batch < 1.
cudaError_t FlashInferDecodeWorkspaceBytes(FlashInferKernel kernel, int max_batch, int n_q_heads, int n_kv_heads,
                                           int head_dim, int page_size, size_t* float_bytes, size_t* int_bytes);

// Plans one step of `batch` sequences (host indptr, batch + 1 entries):
// fills *plan and enqueues the work list's copy on `stream`. Workspaces
// smaller than FlashInferDecodeWorkspaceBytes(>= batch) give
// cudaErrorInvalidValue.
cudaError_t FlashInferDecodePlanStep(FlashInferKernel kernel, const int32_t* indptr_host, int batch, int n_q_heads,
                                     int n_kv_heads, int head_dim, int page_size, const FlashInferDecodeWorkspace& ws,
                                     FlashInferDecodePlan* plan, cudaStream_t stream);

// Decode attention of p.n_tokens tokens, token b of sequence b, over layer
// p.layer, as planned (by the plan's kernel). p.tables, p.tok_seq and p.tok_slot are not read (the
// pages say the same). Asynchronous, no allocation, no host read of device
// data: capturable in a CUDA graph. With stream.programmatic the kernel
// launches with programmatic dependent launch (it waits on the device for
// the previous kernel before reading q or the cache).
cudaError_t LaunchFlashInferDecode(const PagedAttentionParams& p, const FlashInferPages& pages,
                                   const FlashInferDecodePlan& plan, const FlashInferDecodeWorkspace& ws,
                                   KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_FLASHINFER_DECODE_H_
