// BeaconKV (docs/design.md, "The method: BeaconKV"): slots are scored by the
// attention of the R most recent queries and of K beacon queries,
// representatives of the whole query history kept by continual FPS
// (kv/policy/fps.h), one buffer per (layer, query head), or per (layer, KV
// head) with group-shared state (below).
//
// Choices where the design leaves room, and why:
//
// * Normalisation. FPS measures cosine distance, i.e. works on normalised
//   queries, but each beacon scores with its original pre-RoPE vector
//   (ContinualFps keeps it with its norm). A query's norm is its softmax
//   temperature: a normalised beacon would attend more flatly (or sharply)
//   than the model ever did, and under the max aggregate its probabilities
//   would not be comparable with the recent queries'. The beacon is a real
//   past query; FPS only decides which ones to remember.
// * When FPS runs. Add shrinks a buffer to K the moment it reaches U (the
//   continual part, amortised over U - K admissions); the first time at
//   U - phase instead, the buffer's phase spreading the shrinks of the
//   n_layers * n_heads buffers over the tokens (kernels/cuda/
//   beacon_fps_phase.h). So at scoring time buffers hold different point
//   counts, as each is at its own point of the cycle. At scoring time the
//   beacons are FPS(buffer, K) over the buffer as it stands (K..U-1 points
//   after the first shrink; all of them while it holds K or fewer), without
//   modifying it. Rotated at the current position: a beacon stands for a
//   query that may come again now, not for the one that was.
// * Prefill admission. Under kAll, beacon_prompt_queries decides whether
//   prompt queries (positions below prompt_length()) enter the FPS buffer.
//   Off by default: the buffer holds the decoding history only (the recent
//   ring takes every query either way). A prompt query attended only to
//   prompt keys, which keep_prompt protects, so as a beacon it spends one
//   of K points on a history that says nothing about evictable slots; on
//   the default model off recalls slightly more attention and has lower KL
//   in most (prompt, budget) cells (docs/fidelity.md "Prompt queries as
//   beacons"). The rule is by position, so a recompute after preemption,
//   which replays the prompt, agrees. kGlobal needs each query's attention
//   mass beyond the window, which the engine reports for decode steps only
//   (ObserveAttention), so prompt queries are never admitted under kGlobal.
// * Global filter. ObserveQuery parks the token's queries per layer;
//   ObserveAttention (same step, per KV head, possibly concurrently for
//   different KV heads) admits each of its group's heads whose mass over
//   the evictable slots [lead, n_slots - window) exceeds global_threshold:
//   beyond the window and past the protected lead (kept prompt, sinks),
//   whose mass says nothing of what eviction could lose (heads that sink
//   most of their attention would pass otherwise). A parked query
//   that no ObserveAttention claims before the layer's next ObserveQuery is
//   dropped (that is how prompt queries fall out).
// * Recent queries are all queries, unfiltered, in both modes. Each scores
//   causally: its softmax covers only the keys at or before its own
//   position, as its attention did (SnapKV here masks the same way), so it
//   never credits a key it could not have attended. Beacons stand at the
//   current position and see every key.
// * Group-shared state (beacon_group_queries, off by default): the ring and
//   the FPS buffers hold, per KV head, the mean of its group's queries. The
//   mean is taken before RoPE (the group shares the position, so rotating
//   the mean is the mean of the rotated queries) and scores as one query:
//   its logit on a key is the group's mean logit. The state, which at a
//   budget in bytes competes with KV slots, shrinks by the group size.
// * Before any query is observed every score is 0; the selection's tie rule
//   (later slot wins) then keeps the most recent slots.
//
// Per-token cost per layer: a ring write (n_heads * d floats) and, per
// admitted head, a norm and a copy (O(d)), plus a shrink every U - K
// admissions, O(U * K * d) vectorised: U*K/(U-K) ~ 21 d multiply-adds per
// admission at the defaults, ~25 n_heads * d a layer, against the
// 2 * (4 hidden^2 + 3 hidden * ffn) flops of a Llama layer's projections
// (hidden >= n_heads * d): well under 1%. Measured on a loaded 2-core dev VM:
// one 64 -> 16 shrink takes ~17 us at d = 64, ~50 us at d = 128, i.e.
// ~0.35 / 1.1 us per admission amortised. In kAll every buffer admits
// every token; their first shrinks are staggered (kernels/cuda/
// beacon_fps_phase.h), so a token pays at most ceil(n_layers * n_heads /
// (U - K)) shrinks instead of all n_layers * n_heads on one token in U - K
// (before issue 32, a latency spike the average hid). Scoring, every
// `interval` steps, costs one FPS per head and (R + K) * n_slots * d per head (AttentionScores).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/beacon_fps_phase.h"
#include "kv/policy/attention_scoring.h"
#include "kv/policy/fps.h"
#include "kv/policy/policies.h"

namespace beacon {
namespace {

// Score's buffers, one set per thread.
struct ScoreScratch {
  std::vector<int> beacon_idx;
  std::vector<float> queries, scratch;
  std::vector<int32_t> query_pos;
  // RoPE tables: one per ring entry, then the current position's.
  std::vector<float> cs;
};

class BeaconPolicy : public KvPolicy {
 public:
  BeaconPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m)
      : options_(o),
        model_(m),
        rotator_(m),
        row_(static_cast<size_t>(m.n_heads) * m.head_dim),
        state_heads_(o.beacon_group_queries ? m.n_kv_heads : m.n_heads),
        layers_(m.n_layers) {
    const int64_t n_buffers = static_cast<int64_t>(m.n_layers) * state_heads_;
    for (int layer = 0; layer < m.n_layers; ++layer) {
      LayerState& l = layers_[layer];
      l.ring = std::make_unique<RecentQueryRing>(o.recent_queries, state_heads_, m.head_dim);
      l.fps.reserve(state_heads_);
      for (int h = 0; h < state_heads_; ++h) {
        // Buffer layer * state_heads_ + h of n_buffers: its first shrink's phase.
        const int phase =
            BeaconFpsPhase(static_cast<int64_t>(layer) * state_heads_ + h, n_buffers, o.fps_bound, o.beacons);
        l.fps.emplace_back(m.head_dim, o.fps_bound, o.beacons, phase);
      }
      if (global()) {
        l.parked.resize(row_);
        l.parked_live.assign(m.n_heads, 0);
      }
    }
  }

  std::string_view name() const override { return "beacon"; }
  // Score reads only the layer's ring and FPS buffers and writes its own
  // thread's scratch (ScoreScratch); OnCompacted is the no-op default.
  bool concurrent_scoring() const override { return true; }
  bool wants_attention() const override { return global(); }
  void SetProtectedLead(int32_t slots) override { lead_ = slots; }

  void ObserveQuery(int layer, const float* q, int32_t position) override {
    LayerState& l = layers_[layer];
    const int d = model_.head_dim;
    size_t row = row_;
    if (options_.beacon_group_queries) {
      // The group's mean, summed in head order (kv_policy.h states the order).
      const int group = model_.group();
      row = static_cast<size_t>(state_heads_) * d;
      grouped_.assign(row, 0.0f);
      for (int h = 0; h < model_.n_heads; ++h) {
        float* out = grouped_.data() + static_cast<size_t>(h / group) * d;
        for (int i = 0; i < d; ++i) out[i] += q[static_cast<size_t>(h) * d + i];
      }
      for (float& x : grouped_) x /= static_cast<float>(group);
      q = grouped_.data();
    }
    if (options_.beacon_bf16_state) {
      // Round once here: the ring, the FPS buffers and the parked row then
      // all hold exactly what a bf16 store would give back.
      rounded_.resize(row);
      for (size_t i = 0; i < row; ++i) rounded_[i] = Bf16ToFp32(Fp32ToBf16(q[i]));
      q = rounded_.data();
    }
    l.ring->Push(q, position);
    if (!global()) {
      if (!options_.beacon_prompt_queries && position < prompt_length()) return;
      auto add = [&](int64_t begin, int64_t end, int) {
        for (int64_t h = begin; h < end; ++h) l.fps[h].Add(q + static_cast<size_t>(h) * d, position);
      };
      // Under kAll every head admits every token, and the staggered phases
      // (kernels/cuda/beacon_fps_phase.h) give a token at most
      // ceil(n_layers * n_heads / (U - K)) shrinks, of consecutive buffers
      // (one or two layers' at the shipped shapes). A layer with two or more shrinks on this token
      // (one O(U K d) FPS each) runs its heads on the pool; a single shrink
      // or plain copies do not pay for a parallel region. Buffers are per
      // head: no shared writes.
      int shrinks = 0;
      for (const ContinualFps& f : l.fps) shrinks += f.size() == f.shrink_size() - 1;
      ThreadPool* pool = thread_pool();
      if (shrinks >= 2 && pool != nullptr && pool->n_threads() > 1) {
        pool->ParallelFor(state_heads_, 1, add);
      } else {
        add(0, state_heads_, 0);
      }
      return;
    }
    // Parked until this step's ObserveAttention; replaces an unclaimed one.
    // (Validate refuses kGlobal with beacon_group_queries: rows are per head.)
    std::memcpy(l.parked.data(), q, sizeof(float) * row_);
    l.parked_pos = position;
    std::fill(l.parked_live.begin(), l.parked_live.end(), 1);
  }

  // Touches only the group's query heads of `kv_head` (their FPS buffers and
  // parked flags): safe concurrently for different KV heads of one layer.
  void ObserveAttention(int layer, int kv_head, const float* probs, int group, int32_t n_slots) override {
    if (!global()) return;
    LayerState& l = layers_[layer];
    const int d = model_.head_dim;
    const int32_t far_end = n_slots - options_.window;  // slots [lead_, far_end) are evictable
    for (int g = 0; g < group; ++g) {
      const int h = kv_head * group + g;
      if (!l.parked_live[h]) continue;
      l.parked_live[h] = 0;
      const float* p = probs + static_cast<size_t>(g) * n_slots;
      double mass = 0.0;
      for (int32_t s = lead_; s < far_end; ++s) mass += p[s];
      if (mass > options_.global_threshold) l.fps[h].Add(l.parked.data() + static_cast<size_t>(h) * d, l.parked_pos);
    }
  }

  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    const int32_t n = keys.n_slots();
    std::fill(scores, scores + n, 0.0f);
    if (n == 0) return;
    const LayerState& l = layers_[layer];
    const int d = model_.head_dim;
    const int group = model_.group();
    // Per thread: Score runs concurrently for different (layer, KV head)
    // pairs (concurrent_scoring).
    thread_local ScoreScratch tls;
    std::vector<int>& beacon_idx = tls.beacon_idx;
    std::vector<float>& queries = tls.queries;
    std::vector<float>& scratch = tls.scratch;
    std::vector<int32_t>& query_pos = tls.query_pos;
    // One scoring set for the whole group (the max aggregate is order-free,
    // so this is the max over heads of each head's set): the group's keys
    // are read once for all its queries. Head h's set: its recent queries at
    // their own positions, then its beacons at the current position. With
    // group-shared state the group has one set, state head kv_head's.
    queries.clear();
    query_pos.clear();
    // The group's heads share the ring's positions and the current one: one
    // RoPE table per position, not per rotated query (the tables' cos and
    // sin were most of an eviction's rotation cost; issue 34).
    const int ring = l.ring->size();
    std::vector<float>& cs = tls.cs;
    cs.resize(static_cast<size_t>(ring + 1) * d);
    for (int j = 0; j < ring; ++j) rotator_.Table(l.ring->position(j), cs.data() + static_cast<size_t>(j) * d);
    const float* now_cs = cs.data() + static_cast<size_t>(ring) * d;
    rotator_.Table(position, cs.data() + static_cast<size_t>(ring) * d);
    const int sets = options_.beacon_group_queries ? 1 : group;
    for (int g = 0; g < sets; ++g) {
      const int h = options_.beacon_group_queries ? kv_head : kv_head * group + g;
      l.fps[h].Beacons(&beacon_idx);
      const size_t at = queries.size();
      queries.resize(at + (ring + beacon_idx.size()) * d);
      float* out = queries.data() + at;
      for (int j = 0; j < ring; ++j, out += d) {
        rotator_.Apply(l.ring->query(j, h), cs.data() + static_cast<size_t>(j) * d, out);
        query_pos.push_back(l.ring->position(j));
      }
      for (int b : beacon_idx) {
        rotator_.Apply(l.fps[h].point(b), now_cs, out);
        out += d;
        query_pos.push_back(position);  // a beacon stands at the current position: every key is older
      }
    }
    const int n_queries = static_cast<int>(query_pos.size());
    if (n_queries > 0) {
      AttentionScores(queries.data(), n_queries, keys, kv_head, ScoreAggregate::kMax, scores, &scratch,
                      query_pos.data(), /*bf16_products=*/options_.beacon_bf16_state);
    }
    MaxPool1D(scores, n, options_.pool_kernel);
  }

 private:
  bool global() const { return options_.beacon_filter == BeaconFilter::kGlobal; }

  struct LayerState {
    // The last R tokens' queries (order is irrelevant to the max aggregate).
    std::unique_ptr<RecentQueryRing> ring;
    std::vector<ContinualFps> fps;  // per query head
    // kGlobal: the latest token's queries awaiting their attention mass.
    // parked_live is char, not bool: concurrent writers of different heads
    // must not share a byte.
    std::vector<float> parked;
    int32_t parked_pos = 0;
    std::vector<char> parked_live;
  };

  KvPolicyOptions options_;
  PolicyModelInfo model_;
  QueryRotator rotator_;
  size_t row_;        // floats of one token's queries, n_heads * head_dim
  int state_heads_;   // rows of the ring and FPS buffers a layer: n_heads, or n_kv_heads when group-shared
  int32_t lead_ = 0;  // SetProtectedLead
  std::vector<LayerState> layers_;
  std::vector<float> rounded_;  // ObserveQuery's bf16-rounded row (beacon_bf16_state)
  std::vector<float> grouped_;  // ObserveQuery's group means (beacon_group_queries)
};

}  // namespace

std::unique_ptr<KvPolicy> NewBeaconPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  return std::make_unique<BeaconPolicy>(o, m);
}

}  // namespace beacon
