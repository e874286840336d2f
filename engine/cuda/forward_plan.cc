#include "engine/cuda/forward_plan.h"

#include <algorithm>

namespace beacon {
namespace {

size_t Align4(size_t n) { return (n + 3) / 4 * 4; }  // 4 int32 = 16 bytes

// The pages of each entry's last token: slots [0, num_slots + n - 1].
void FillPages(std::span<const ForwardEntry> batch, ForwardPlan* plan) {
  ForwardPlan& p = *plan;
  int32_t* indptr = p.packed.data() + p.offsets.pages_indptr;
  int32_t* indices = p.packed.data() + p.offsets.pages_indices;
  int32_t* last = p.packed.data() + p.offsets.pages_last;
  int32_t* qo = p.packed.data() + p.offsets.pages_qo;
  indptr[0] = 0;
  for (size_t e = 0; e <= batch.size(); ++e) qo[e] = static_cast<int32_t>(e);
  for (size_t e = 0; e < batch.size(); ++e) {
    const ForwardEntry& en = batch[e];
    const int32_t len = en.kv->num_slots() + static_cast<int32_t>(en.tokens.size());
    const int32_t pages = (len + p.page_size - 1) / p.page_size;
    const std::vector<int32_t>& blocks = en.kv->block_ids();
    std::copy(blocks.begin(), blocks.begin() + pages, indices + indptr[e]);
    indptr[e + 1] = indptr[e] + pages;
    last[e] = len - (pages - 1) * p.page_size;
  }
}

}  // namespace

ForwardPlanOffsets PlanOffsets(int64_t n_tokens, int64_t n_rows, int64_t n_seqs, int stride, bool pages) {
  ForwardPlanOffsets o;
  size_t at = 0;
  auto take = [&](size_t* field, size_t n) {
    *field = at;
    at += Align4(n);
  };
  take(&o.token_ids, n_tokens);
  take(&o.tok_seq, n_tokens);
  take(&o.tok_slot, n_tokens);
  take(&o.tok_pos, n_tokens);
  take(&o.logit_rows, n_rows);
  take(&o.seq_first, n_seqs);
  take(&o.seq_n, n_seqs);
  take(&o.block_tables, static_cast<size_t>(n_seqs) * stride);
  if (pages) {
    take(&o.pages_indptr, n_seqs + 1);
    take(&o.pages_indices, static_cast<size_t>(n_seqs) * stride);
    take(&o.pages_last, n_seqs);
    take(&o.pages_qo, n_seqs + 1);
  }
  o.total = at;
  return o;
}

void BuildForwardPlan(std::span<const ForwardEntry> batch, ForwardPlan* plan, int page_size) {
  ForwardPlan& p = *plan;
  p.n_seqs = static_cast<int64_t>(batch.size());
  p.n_tokens = 0;
  p.n_rows = 0;
  p.max_seq_tokens = 0;
  p.all_decode = true;
  int max_blocks = 0;
  for (const ForwardEntry& e : batch) {
    const int64_t n = static_cast<int64_t>(e.tokens.size());
    p.n_tokens += n;
    p.n_rows += e.all_logits ? n : 1;
    p.max_seq_tokens = std::max<int32_t>(p.max_seq_tokens, static_cast<int32_t>(n));
    p.all_decode = p.all_decode && n == 1;
    max_blocks = std::max(max_blocks, e.kv->num_blocks());
  }
  // Row length: a power of two, so that CUDA graphs keyed on it are few.
  p.stride = 16;
  while (p.stride < max_blocks) p.stride *= 2;
  p.page_size = std::max(page_size, 0);
  p.offsets = PlanOffsets(p.n_tokens, p.n_rows, p.n_seqs, p.stride, p.page_size > 0);
  p.packed.assign(p.offsets.total, 0);
  int32_t* ids = p.packed.data() + p.offsets.token_ids;
  int32_t* seq = p.packed.data() + p.offsets.tok_seq;
  int32_t* slot = p.packed.data() + p.offsets.tok_slot;
  int32_t* pos = p.packed.data() + p.offsets.tok_pos;
  int32_t* rows = p.packed.data() + p.offsets.logit_rows;
  int32_t* first = p.packed.data() + p.offsets.seq_first;
  int32_t* count = p.packed.data() + p.offsets.seq_n;
  int32_t* tables = p.packed.data() + p.offsets.block_tables;
  int64_t t = 0, r = 0;
  p.rows_are_tokens = p.n_rows == p.n_tokens;
  for (size_t e = 0; e < batch.size(); ++e) {
    const ForwardEntry& en = batch[e];
    const int32_t n = static_cast<int32_t>(en.tokens.size());
    first[e] = static_cast<int32_t>(t);
    count[e] = n;
    const std::vector<int32_t>& blocks = en.kv->block_ids();
    std::copy(blocks.begin(), blocks.end(), tables + e * static_cast<size_t>(p.stride));
    for (int32_t i = 0; i < n; ++i, ++t) {
      ids[t] = en.tokens[i];
      seq[t] = static_cast<int32_t>(e);
      slot[t] = en.kv->num_slots() + i;
      pos[t] = en.start_pos + i;
      if (en.all_logits || i == n - 1) rows[r++] = static_cast<int32_t>(t);
    }
  }
  if (p.page_size > 0 && p.all_decode) FillPages(batch, &p);  // FlashInfer reads them in decode steps only
}

}  // namespace beacon
