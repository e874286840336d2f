// Attention over the paged KV cache (kernels/cuda/paged_kv.h) for a ragged
// batch of query tokens: decode (split-K, any set of tokens) and chunked
// prefill (query tiles of contiguous tokens per sequence).
//
// Memory layout (device pointers):
//   q   query of token t, head h at q + t * q_token_stride + h * head_dim
//       (bf16, after RoPE; q may be a view into the fused QKV output, whose
//       token stride is (n_q_heads + 2 * n_kv_heads) * head_dim)
//   out [n_tokens][n_q_heads * head_dim] bf16, dense
//   kv  the paged cache; layer `layer`; keys after RoPE
//   tables.table [rows][tables.stride] int32 block ids; token t reads row
//       tok_seq[t]
// Token t attends to slots [0, tok_slot[t]] (inclusive) of its row: causal in
// slot order (after compaction slots no longer equal positions; attention
// needs no positions because keys are cached after RoPE).
// GQA: group = n_q_heads / n_kv_heads; query head h uses KV head h / group.
//
// Arithmetic: scores q . k * scale in fp32 from the bf16 inputs, softmax in
// fp32 (the running max is subtracted; exponentials are base 2 of scores
// premultiplied by log2(e), the same function), P V accumulated in fp32, and
// the output rounded to bf16 once. Results differ from a double-precision
// loop only by fp32 summation order and the final rounding.
//
// Aliasing: `out` must not overlap q or the cache. The workspace belongs to
// one launch at a time (stream order).
//
// Error contract: launchers return cudaErrorInvalidValue (before any CUDA
// call) when PagedAttentionParamsValid fails or their own arguments are bad;
// cudaSuccess without launching when there is nothing to compute; otherwise
// the launch status. They are asynchronous on `stream`, read no device data on
// the host, allocate nothing and synchronise nothing, so they can be captured
// in a CUDA graph. A launcher may set the kernel's dynamic shared memory limit
// (cudaFuncSetAttribute) before launching.
//
// Device-side REQUIRES (not checked; violating them reads out of bounds):
// tok_seq[t] is a row of the table, 0 <= tok_slot[t], every block id a token
// reaches (slots 0..tok_slot[t]) is in [0, num_blocks) and the table row has
// at least tok_slot[t] / block_size + 1 entries.
#ifndef BEACON_KERNELS_CUDA_PAGED_ATTENTION_H_
#define BEACON_KERNELS_CUDA_PAGED_ATTENTION_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_stream.h"
#include "kernels/cuda/paged_kv.h"

namespace beacon {

struct PagedAttentionParams {
  const __nv_bfloat16* q = nullptr;
  int64_t q_token_stride = 0;    // elements; >= n_q_heads * head_dim
  __nv_bfloat16* out = nullptr;  // [n_tokens][n_q_heads * head_dim]
  PagedKv kv;                    // k and v 16-byte aligned (cudaMalloc'd)
  int layer = 0;
  int n_q_heads = 0;  // multiple of kv.layout.n_kv_heads
  BlockTables tables;
  const int32_t* tok_seq = nullptr;   // [n_tokens] block-table row of token t
  const int32_t* tok_slot = nullptr;  // [n_tokens] last slot token t attends to
  int64_t n_tokens = 0;
  float scale = 1.0f;  // softmax scale, 1 / sqrt(head_dim)
};

// Host-side checks shared by both launchers: non-null pointers, 0 <= layer <
// n_layers, n_kv_heads > 0, n_q_heads a positive multiple of it, head_dim even
// in [2, 256], block_size > 0, num_blocks > 0, stride > 0, q_token_stride >=
// n_q_heads * head_dim, 0 <= n_tokens <= INT32_MAX, finite scale, k and v
// 16-byte aligned.
bool PagedAttentionParamsValid(const PagedAttentionParams& p);

// ---- Decode ----------------------------------------------------------------
// Any set of tokens (typically one per sequence). Split-K: the slot range of
// each (token, KV head) is cut into partitions of
//   len = roundup(max(256, ceil(n / max_splits)), 64)   (n = tok_slot[t] + 1)
// slots, computed on the device, so the grid (n_tokens, n_kv_heads,
// max_splits) does not depend on context lengths and a captured graph replays
// correctly as contexts grow. A partition computes all query heads of its KV
// head from one read of each K/V row and writes (max, sum, unnormalised
// output) to the workspace; a second kernel merges the partitions
// (log-sum-exp) into `out`. Tokens that need a single partition are written
// directly and skipped by the merge. Partitions past the last key do nothing.
//
// Workspace: DecodeAttentionWorkspaceBytes(n_tokens, n_q_heads, head_dim,
// max_splits) bytes, 4-byte aligned; 0 (and `workspace` may be null) when
// max_splits == 1. 1 <= max_splits <= 1024.
//
// Two split kernels compute the same thing (same partitions, same workspace,
// same merge): kSimt in fp32 FMAs on the CUDA cores; kMma on tensor cores
// (kernels/cuda/decode_attention_mma.h says why), where the scores' products
// are the same exact products summed in fp32 but P is rounded to bf16 before
// P V (as FlashAttention and FlashInfer do). kMma takes head_dim 64 and 128;
// other head dims run kSimt whichever is asked.
enum class DecodeAttentionKernel { kSimt, kMma };
size_t DecodeAttentionWorkspaceBytes(int64_t n_tokens, int n_q_heads, int head_dim, int max_splits);
cudaError_t LaunchDecodeAttention(const PagedAttentionParams& p, int max_splits, void* workspace, KernelStream stream,
                                  DecodeAttentionKernel kernel = DecodeAttentionKernel::kSimt);

// ---- Prefill ---------------------------------------------------------------
// Chunked, causal prefill over the paged cache, which already holds earlier
// chunks' slots and this chunk's K/V (LaunchQkvRopeKvWrite ran first).
// Sequence i owns tokens [seq_first_token[i], seq_first_token[i] +
// seq_n_tokens[i]) of the token arrays (device arrays of n_seqs entries);
// they share the block-table row tok_seq[seq_first_token[i]] and have
// ascending tok_slot. One block computes a query tile of 64 rows (tokens x
// the group's query heads, up to 8 heads per block) for one KV head with an
// online (flash-style) softmax, so each K/V tile it loads serves every row.
// Sequences of one token are handled too (a mixed batch may run everything
// through this kernel). max_seq_tokens bounds the grid: tokens of a sequence
// past max_seq_tokens are not computed, so it must be >= every seq_n_tokens.
// Returns cudaErrorInvalidValue also for null seq arrays, n_seqs < 0 or
// max_seq_tokens < 0; cudaSuccess without launching when n_seqs,
// max_seq_tokens or n_tokens is 0.
cudaError_t LaunchPrefillAttention(const PagedAttentionParams& p, const int32_t* seq_first_token,
                                   const int32_t* seq_n_tokens, int n_seqs, int max_seq_tokens, cudaStream_t stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_PAGED_ATTENTION_H_
