// Causal attention of a run of consecutive tokens of one sequence over one KV
// head's paged slots: prefill (a whole prompt, or one chunk of it whose earlier
// part is already cached) and, as a run of one token, a decode step
// (PagedAttention in attention.h is that case).
//
// With AVX-512 (head_dim a multiple of 8, at most 256), flash-attention style:
// a tile of query rows (every query head of the GQA group for several tokens)
// meets tiles of keys read from the paged cache; the softmax is computed
// online, with a running maximum and sum per row, so no score matrix is
// materialised and every cached key and value is read once per query tile
// instead of once per token.
//
// Arithmetic (f32 throughout). Key tiles are kPrefillKeyTile slots anchored
// at slot 0, and each query row's operations never depend on the other rows of
// its tile. A token's output is therefore a function of its own query, the
// slots [0, its slot] and the scale only: bit-identical however the prompt is
// cut into chunks (first_slot, n_tokens), including chunks of one token (a
// decode step, PagedAttention, which applies the same operations on its own
// kernel), and whichever tokens share its tile. Per row: scores summed over
// head_dim in order; per key tile, the max, alpha = exp(m_old - m_new),
// p = exp(s - m_new), l = l * alpha + (tile sum of p, a fixed tree), out =
// out * alpha + sum_j p_j v_j in key order; at the end out / l, with exp the
// polynomial of attention_exp.h.
//
// Without AVX-512 (PrefillAttentionAvx2) each token is computed by itself, in
// the key segments of the AVX2 decode kernel (attention.h): a prefill gives a
// token the bits a decode step does, trivially chunk-invariant. Head dims
// that kernel does not take (not a multiple of 8, above 256) go to
// PrefillAttentionGeneric: per token, the two-pass softmax (scores, std::exp
// softmax, weighted sum). The builds agree to ~1e-6 relative, not bit for bit.
#ifndef BEACON_KERNELS_CPU_PREFILL_ATTENTION_H_
#define BEACON_KERNELS_CPU_PREFILL_ATTENTION_H_

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace beacon {

// Keys per tile of the online softmax; tiles start at multiples of it.
inline constexpr int kPrefillKeyTile = 16;

// Query rows per register tile of the AVX-512 kernel (three vectors of 16).
inline constexpr int kPrefillRowTile = 48;

// n_tokens consecutive tokens of one sequence and the G query heads of one
// KV head. Token i (0 <= i < n_tokens) is at slot first_slot + i and attends
// to slots [0, first_slot + i]: its own K and V must already be in the cache.
// Query head g of token i: q + i * q_token_stride + g * head_dim (after
// RoPE); its output: out + i * out_token_stride + g * head_dim.
struct PrefillQueries {
  const float* q = nullptr;
  int64_t q_token_stride = 0;
  float* out = nullptr;
  int64_t out_token_stride = 0;
  int n_q_heads = 1;       // G, >= 1
  int32_t first_slot = 0;  // >= 0
  int32_t n_tokens = 0;    // >= 0
};

// out = softmax(scale * q k^T) v, causal in slot order (after compaction
// slots need not equal positions; keys are cached after RoPE).
// `probs`, when not null, receives the attention probabilities of each query
// head g at probs[g * (first_slot + 1) + s], s <= first_slot (what a decode
// step shows a KV policy); REQUIRES n_tokens == 1 then.
// REQUIRES kv.head_dim >= 1, `out` overlaps neither q nor the cache, and the
// block table covers slots [0, first_slot + n_tokens).
void PrefillAttention(const PrefillQueries& queries, const PagedHeadView& kv, float scale, float* probs = nullptr);

// The portable path (per token, two-pass softmax), used where head_dim is not
// a multiple of 8 or above 256 (or AVX2 is absent); exposed so that tests
// check it on every machine.
void PrefillAttentionGeneric(const PrefillQueries& queries, const PagedHeadView& kv, float scale,
                             float* probs = nullptr);

// The AVX2 path: each token's key segments on PagedAttentionSegmentAvx2,
// merged by MergeAttentionSegmentsAvx2 (the decode step of an AVX2 build);
// exposed so that tests check it on AVX-512 machines too.
// REQUIRES Avx2AttentionSupported(kv.head_dim).
void PrefillAttentionAvx2(const PrefillQueries& queries, const PagedHeadView& kv, float scale, float* probs = nullptr);

// Tokens per query tile for G query heads: what a caller that splits the
// tokens into parallel tasks should give each task, so that no tile is
// left partly empty.
inline int PrefillTileTokens(int n_q_heads) { return n_q_heads >= kPrefillRowTile ? 1 : kPrefillRowTile / n_q_heads; }

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_PREFILL_ATTENTION_H_
