#include "kernels/cpu/attention.h"

#include "kernels/cpu/prefill_attention.h"

namespace beacon {

// A decode step is a prefill of one token: the same kernel, so a token's
// output is bit-identical whether its prompt chunk had one token or many
// (the engine's logits do not depend on chunking). The probabilities come
// from the same pass (raw scores kept, normalised by the final max and sum).
void PagedAttention(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale, float* scores,
                    float* out) {
  PrefillQueries qs;
  qs.q = q;
  qs.q_token_stride = static_cast<int64_t>(n_q_heads) * kv.head_dim;
  qs.out = out;
  qs.out_token_stride = qs.q_token_stride;
  qs.n_q_heads = n_q_heads;
  qs.first_slot = n_keys - 1;
  qs.n_tokens = 1;
  PrefillAttention(qs, kv, scale, scores);
}

}  // namespace beacon
