// CpuBackend::Attention: every token of a step over its sequence's cached
// keys, in parallel tasks.
//
// A prefill entry (more than one token: a prompt or a chunk of it) runs the
// tiled PrefillAttention on tiles of PrefillTileTokens(group) consecutive
// tokens, one KV head per task. A decode entry (one token) is cut into key
// segments (kAttentionSegment slots, attention.h) per KV head, each a task:
// batch-1 decode on the default model has only 3 KV heads for the pool's
// threads, and at long contexts the step is these tasks. The task that
// finishes a (token, head)'s last segment merges its segments and shows the
// probabilities to a KV policy that asks for them.
//
// Numerics: a row's arithmetic depends only on its own query and slot (key
// tiles and segments anchored at slot 0, segments folded left to right
// whichever thread ran them), so a token's attention output is bit-identical
// however its prompt is chunked (one token at a time included) and whatever
// shares its batch; with the batch-invariant matmuls, so are the logits.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/cpu_backend.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/prefill_attention.h"

namespace beacon {

void CpuBackend::Attention(int l, std::span<const ForwardEntry> batch) {
  const ModelConfig& c = weights_->config;
  const int d = c.head_dim;
  const int group = c.group_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const bool segmented = SegmentedAttentionSupported(d);
  const size_t partial_floats = AttentionPartialFloats(group, d);
  // One decode (token, KV head): where its segments' partial states and, for
  // an observing policy, its probabilities go; and how many segments remain.
  struct DecodeJob {
    size_t partials;  // offset into decode_partials_
    size_t scores;    // offset into decode_scores_ (observing policies only)
    bool observe;
  };
  struct Task {
    int64_t t0;    // first token (index into tokens_)
    int32_t n;     // tokens
    int h;         // KV head
    bool prefill;  // PrefillAttention (else a decode step, n == 1)
    int32_t seg;   // decode: the key segment (-1: PagedAttention whole)
    int32_t job;   // decode: index into jobs
    int64_t cost;  // ~ query rows x keys, for the order of claiming
  };
  std::vector<Task> tasks;
  std::vector<DecodeJob> jobs;
  size_t partials_size = 0, scores_size = 0;
  const int tile = PrefillTileTokens(group);
  int64_t t = 0;
  for (const ForwardEntry& en : batch) {
    const int32_t nt = static_cast<int32_t>(en.tokens.size());
    if (nt > 1) {
      for (int32_t i = 0; i < nt; i += tile) {
        const int32_t n = std::min(tile, nt - i);
        const int64_t cost = int64_t{n} * (tokens_[t + i + n - 1].slot + 1);
        for (int h = 0; h < c.n_kv_heads; ++h) tasks.push_back({t + i, n, h, true, -1, -1, cost});
      }
    } else {
      const int32_t n_keys = tokens_[t].slot + 1;  // causal: every slot up to its own
      const bool observe = en.policy != nullptr && en.policy->wants_attention();
      const int32_t n_seg = segmented ? AttentionSegments(n_keys) : 1;
      for (int h = 0; h < c.n_kv_heads; ++h) {
        const int32_t job = static_cast<int32_t>(jobs.size());
        jobs.push_back({partials_size, scores_size, observe});
        partials_size += partial_floats * n_seg;
        if (observe) scores_size += static_cast<size_t>(group) * n_keys;
        for (int32_t seg = 0; seg < n_seg; ++seg) {
          const int32_t keys = segmented ? std::min(kAttentionSegment, n_keys - seg * kAttentionSegment) : n_keys;
          tasks.push_back({t, 1, h, false, segmented ? seg : -1, job, int64_t{group} * keys});
        }
      }
    }
    t += nt;
  }
  if (decode_partials_.size() < partials_size) decode_partials_.resize(partials_size);
  if (decode_scores_.size() < scores_size) decode_scores_.resize(scores_size);
  auto pending = std::make_unique<std::atomic<int32_t>[]>(jobs.size());
  for (const Task& tk : tasks) {
    if (tk.job >= 0) pending[tk.job].fetch_add(1, std::memory_order_relaxed);
  }
  // Costliest first: the threads claim tasks in order, so the long causal
  // tiles at the end of a prompt do not come last and leave a thread idle.
  std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.cost > b.cost; });

  auto body = [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const Task& tk = tasks[task];
      const TokenRef& ref = tokens_[tk.t0];
      const ForwardEntry& entry = batch[ref.entry];
      const SequenceKv* kv = entry.kv;
      const KvCache* cache = kv->cache();
      PagedHeadView view;
      view.k_head_base = cache->KData(l, 0, tk.h);
      view.v_head_base = cache->VData(l, 0, tk.h);
      view.dtype = cache->dtype();
      view.block_stride = cache->block_stride();
      view.block_ids = kv->block_ids().data();
      view.block_size = cache->shape().block_size;
      view.head_dim = d;
      const int64_t off = tk.t0 * c.q_dim() + tk.h * group * d;
      if (tk.prefill) {
        PrefillQueries qs;
        qs.q = &q_[off];
        qs.q_token_stride = c.q_dim();
        qs.out = &att_[off];
        qs.out_token_stride = c.q_dim();
        qs.n_q_heads = group;
        qs.first_slot = ref.slot;
        qs.n_tokens = tk.n;
        PrefillAttention(qs, view, scale);
        continue;
      }
      const int32_t n_keys = ref.slot + 1;
      const DecodeJob& job = jobs[tk.job];
      // The probabilities only when a policy reads them (H2O): writing and
      // normalising them costs a long-context step time for nothing else.
      float* scores = job.observe ? &decode_scores_[job.scores] : nullptr;
      float* partials = &decode_partials_[job.partials];
      if (tk.seg < 0) {
        PagedAttention(&q_[off], group, view, n_keys, scale, scores, &att_[off]);
      } else {
        PagedAttentionSegment(&q_[off], group, view, n_keys, tk.seg, scale, scores,
                              partials + static_cast<size_t>(tk.seg) * partial_floats);
        // acq_rel: the last segment's task sees every other segment's writes.
        if (pending[tk.job].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        MergeAttentionSegments(partials, group, d, n_keys, scores, &att_[off]);
      }
      // Decode entries only: the jobs of one entry are then distinct KV
      // heads, which a policy may observe concurrently.
      if (job.observe) entry.policy->ObserveAttention(l, tk.h, scores, group, n_keys);
    }
  };
  if (pool_ != nullptr) {
    pool_->ParallelFor(static_cast<int64_t>(tasks.size()), 1, body);
  } else {
    body(0, static_cast<int64_t>(tasks.size()), 0);
  }
}

}  // namespace beacon
