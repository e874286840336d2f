// The host side of one CUDA forward step: everything the kernels need to
// know about a ragged batch, flattened into int32 arrays and packed into one
// buffer that travels to the device in a single copy.
//
// Packed layout (int32 elements, in this order, each array starting on a
// 16-byte boundary; offsets depend only on n_tokens, n_rows, n_seqs and
// stride, so a CUDA graph captured for those counts finds every array at the
// same device address on every replay):
//   token_ids[n_tokens]   token t's id
//   tok_seq[n_tokens]     batch entry (= block-table row) of token t
//   tok_slot[n_tokens]    slot token t writes; it attends to slots [0, slot]
//   tok_pos[n_tokens]     RoPE position
//   logit_rows[n_rows]    token index of each logits row, in batch order
//   seq_first[n_seqs]     first token of entry e
//   seq_n[n_seqs]         tokens of entry e
//   block_tables[n_seqs][stride]  entry e's block ids (unused tail: 0)
// and, only for FlashInfer's decode (page_size > 0 in BuildForwardPlan; the
// CSR form of kernels/flashinfer/decode.h; empty otherwise):
//   pages_indptr[n_seqs + 1]      pages entry e reads: [indptr[e], indptr[e + 1])
//   pages_indices[n_seqs * stride]  their block ids, entries back to back
//   pages_last[n_seqs]            slots used in entry e's last page
//   pages_qo[n_seqs + 1]          0, 1, ..., n_seqs (its tensor-core kernel's query offsets)
// The pages cover the slots of entry e's token; they are filled only for
// all-decode steps, the only ones FlashInfer's decode runs (zero otherwise).
// Tokens of an entry are contiguous and in order; slots continue the
// entry's cache (num_slots() before the step).
#ifndef BEACON_ENGINE_CUDA_FORWARD_PLAN_H_
#define BEACON_ENGINE_CUDA_FORWARD_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend.h"

namespace beacon {

struct ForwardPlanOffsets {
  size_t token_ids = 0, tok_seq = 0, tok_slot = 0, tok_pos = 0, logit_rows = 0, seq_first = 0, seq_n = 0,
         block_tables = 0, pages_indptr = 0, pages_indices = 0, pages_last = 0, pages_qo = 0;
  size_t total = 0;  // int32 elements of the whole packed buffer
};

// Offsets (in int32 elements) of the packed arrays; the pages' arrays take
// room only when `pages`.
ForwardPlanOffsets PlanOffsets(int64_t n_tokens, int64_t n_rows, int64_t n_seqs, int stride, bool pages = false);

struct ForwardPlan {
  int64_t n_tokens = 0;
  int64_t n_rows = 0;  // logits rows
  int64_t n_seqs = 0;
  int stride = 0;  // block-table row length: a power of two >= 16
  int32_t max_seq_tokens = 0;
  bool all_decode = false;       // every entry runs exactly one token
  bool rows_are_tokens = false;  // logit_rows[i] == i for every token (no gather needed)
  int page_size = 0;             // > 0: the pages' arrays are filled (FlashInfer's decode)
  ForwardPlanOffsets offsets;
  std::vector<int32_t> packed;
};

// Builds the plan of `batch`, whose sequences already reserved their new
// slots (the block tables cover them). page_size > 0 (the cache's block
// size) also fills the pages' arrays.
void BuildForwardPlan(std::span<const ForwardEntry> batch, ForwardPlan* plan, int page_size = 0);

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_FORWARD_PLAN_H_
