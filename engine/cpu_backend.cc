#include "engine/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/prefill_attention.h"

namespace beacon {

CpuBackend::CpuBackend(const ModelWeights* weights, ThreadPool* pool) : weights_(weights), pool_(pool) {
  const ModelConfig& c = weights_->config;
  // The model's (possibly scaled) RoPE table: the same one the CUDA backend
  // uploads and the KV policies rotate stored queries with.
  RopeTable rope = c.RopeFrequencies();
  inv_freq_ = std::move(rope.inv_freq);
  rope_attention_factor_ = rope.attention_factor;
  scores_.resize(pool_ != nullptr ? pool_->n_threads() : 1);
  auto pack = [&](const Tensor& t) {
    if (t.empty() || !PackedMatrix::Supported(t.dtype) || packed_.contains(t.data)) return;
    packed_[t.data] = PackedMatrix::Pack(t.dtype, t.rows, t.cols, t.data, pool_);
  };
  for (const LayerWeights& l : weights_->layers) {
    // Q, K, V fused when all three share a type, else Q with K when those do
    // (llama.cpp's Q4_K_M gives V another type in half the layers).
    FusedLinear qkv = Fuse({&l.wq, &l.wk, &l.wv}, pool_);
    if (qkv.packed == nullptr) qkv = Fuse({&l.wq, &l.wk}, pool_);
    const size_t fused_qkv_parts = qkv.rows.size();
    fused_qkv_.push_back(std::move(qkv));
    fused_gate_up_.push_back(Fuse({&l.w_gate, &l.w_up}, pool_));
    if (fused_qkv_parts == 0) {
      pack(l.wq);
      pack(l.wk);
    }
    if (fused_qkv_parts < 3) pack(l.wv);
    if (fused_gate_up_.back().packed == nullptr) {
      pack(l.w_gate);
      pack(l.w_up);
    }
    pack(l.wo);
    pack(l.w_down);
  }
  pack(weights_->output);
}

CpuBackend::FusedLinear CpuBackend::Fuse(std::initializer_list<const Tensor*> parts, ThreadPool* pool) {
  FusedLinear f;
  const Tensor& first = **parts.begin();
  if (first.empty() || !PackedMatrix::Supported(first.dtype)) return f;
  int64_t rows = 0;
  for (const Tensor* t : parts) {
    if (t->empty() || t->dtype != first.dtype || t->cols != first.cols) return f;
    rows += t->rows;
  }
  // The parts' rows one after another, packed, then the copy is dropped.
  std::vector<uint8_t> concat;
  concat.reserve(static_cast<size_t>(rows) * first.row_bytes());
  for (const Tensor* t : parts) {
    const auto* bytes = static_cast<const uint8_t*>(t->data);
    concat.insert(concat.end(), bytes, bytes + t->bytes());
    f.rows.push_back(t->rows);
  }
  f.packed = PackedMatrix::Pack(first.dtype, rows, first.cols, concat.data(), pool);
  return f;
}

void CpuBackend::LinearFused(const FusedLinear& f, const float* x, int64_t n, std::initializer_list<float*> outs) {
  const PackedMatrix& p = *f.packed;
  fused_out_.resize(static_cast<size_t>(n) * p.rows());
  MatMul(MatrixView{p.dtype(), p.rows(), p.cols(), nullptr, &p}, x, n, fused_out_.data(), pool_, &xq_);
  int64_t offset = 0;
  size_t i = 0;
  for (float* out : outs) {
    const int64_t r = f.rows[i++];
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(out + t * r, &fused_out_[t * p.rows() + offset], sizeof(float) * r);
    }
    offset += r;
  }
}

void CpuBackend::Resize(int64_t n) {
  const ModelConfig& c = weights_->config;
  x_.resize(n * c.hidden);
  xb_.resize(n * c.hidden);
  q_.resize(n * c.q_dim());
  k_.resize(n * c.kv_dim());
  v_.resize(n * c.kv_dim());
  att_.resize(n * c.q_dim());
  gate_.resize(n * c.ffn_hidden);
  up_.resize(n * c.ffn_hidden);
}

void CpuBackend::Linear(const Tensor& w, const float* x, int64_t n, float* y) {
  auto it = packed_.find(w.data);
  MatMul(MatrixView{w.dtype, w.rows, w.cols, w.data, it != packed_.end() ? it->second.get() : nullptr}, x, n, y, pool_,
         &xq_);
}

absl::Status CpuBackend::Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) {
  if (absl::Status s = ValidateBatch(weights_->config, batch, KvStorage::kHost); !s.ok()) return s;
  const ModelConfig& c = weights_->config;

  // Reserve every sequence's new slots first, so a full pool fails the step
  // before anything is written.
  if (absl::Status s = ReserveBatch(batch); !s.ok()) return s;

  tokens_.clear();
  int64_t n_logit_rows = 0;
  for (size_t e = 0; e < batch.size(); ++e) {
    const ForwardEntry& en = batch[e];
    for (size_t i = 0; i < en.tokens.size(); ++i) {
      tokens_.push_back(
          {static_cast<int>(e), en.kv->num_slots() + static_cast<int32_t>(i), en.start_pos + static_cast<int32_t>(i)});
    }
    n_logit_rows += en.all_logits ? static_cast<int64_t>(en.tokens.size()) : 1;
  }
  const int64_t n = static_cast<int64_t>(tokens_.size());
  Resize(n);
  // Each token's RoPE cos/sin, shared by every head of every layer.
  rope_cs_.resize(n * c.head_dim);
  for (int64_t t = 0; t < n; ++t) {
    RopeCosSin(c.head_dim, tokens_[t].pos, inv_freq_.data(), rope_attention_factor_, &rope_cs_[t * c.head_dim]);
  }

  // Token embeddings.
  {
    int64_t t = 0;
    for (const ForwardEntry& en : batch) {
      for (int32_t id : en.tokens) {
        DequantizeRow(weights_->tok_embd.dtype, weights_->tok_embd.row(id), &x_[t * c.hidden], c.hidden);
        ++t;
      }
    }
  }

  for (int l = 0; l < c.n_layers; ++l) Layer(l, batch);

  // Final norm and logits for the rows that want them.
  std::vector<float> rows(n_logit_rows * c.hidden);
  {
    int64_t t = 0, r = 0;
    for (const ForwardEntry& en : batch) {
      const int64_t nt = static_cast<int64_t>(en.tokens.size());
      const int64_t first = en.all_logits ? 0 : nt - 1;
      for (int64_t i = first; i < nt; ++i, ++r) {
        RmsNorm(&x_[(t + i) * c.hidden], weights_->output_norm.f32(), c.hidden, c.rms_eps, &rows[r * c.hidden]);
      }
      t += nt;
    }
  }
  logits->resize(n_logit_rows * c.vocab_size);
  Linear(weights_->output, rows.data(), n_logit_rows, logits->data());

  for (const ForwardEntry& en : batch) {
    en.kv->CommitSlots(en.kv->num_slots() + static_cast<int32_t>(en.tokens.size()));
  }
  return absl::OkStatus();
}

void CpuBackend::Layer(int l, std::span<const ForwardEntry> batch) {
  const ModelConfig& c = weights_->config;
  const LayerWeights& w = weights_->layers[l];
  const int64_t n = static_cast<int64_t>(tokens_.size());
  const int d = c.head_dim;

  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(&x_[t * c.hidden], w.attn_norm.f32(), c.hidden, c.rms_eps, &xb_[t * c.hidden]);
  }
  const FusedLinear& qkv = fused_qkv_[l];
  if (qkv.rows.size() == 3) {
    LinearFused(qkv, xb_.data(), n, {q_.data(), k_.data(), v_.data()});
  } else {
    if (qkv.rows.size() == 2) {
      LinearFused(qkv, xb_.data(), n, {q_.data(), k_.data()});
    } else {
      Linear(w.wq, xb_.data(), n, q_.data());
      Linear(w.wk, xb_.data(), n, k_.data());
    }
    Linear(w.wv, xb_.data(), n, v_.data());
  }

  const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
  for (int64_t t = 0; t < n; ++t) {
    float* q = &q_[t * c.q_dim()];
    float* k = &k_[t * c.kv_dim()];
    float* v = &v_[t * c.kv_dim()];
    if (c.qkv_bias) {
      AddInPlace(q, w.bq.f32(), c.q_dim());
      AddInPlace(k, w.bk.f32(), c.kv_dim());
      AddInPlace(v, w.bv.f32(), c.kv_dim());
    }
    const TokenRef& ref = tokens_[t];
    if (c.qk_norm) {
      for (int h = 0; h < c.n_heads; ++h) RmsNorm(q + h * d, w.q_norm.f32(), d, c.rms_eps, q + h * d);
    }
    if (KvPolicy* policy = batch[ref.entry].policy; policy != nullptr) policy->ObserveQuery(l, q, ref.pos);
    for (int h = 0; h < c.n_heads; ++h) {
      RopeRotate(q + h * d, d, &rope_cs_[t * d], interleaved);
    }
    // Write this token's K (after RoPE) and V into its slot of every KV head.
    SequenceKv* kv = batch[ref.entry].kv;
    KvCache* cache = kv->cache();
    const int bs = cache->shape().block_size;
    const int32_t block = kv->block_ids()[ref.slot / bs];
    const int off = ref.slot % bs;
    for (int h = 0; h < c.n_kv_heads; ++h) {
      if (c.qk_norm) RmsNorm(k + h * d, w.k_norm.f32(), d, c.rms_eps, k + h * d);
      RopeRotate(k + h * d, d, &rope_cs_[t * d], interleaved);
      if (cache->dtype() == DType::kF32) {
        std::memcpy(cache->K(l, block, h) + off * d, k + h * d, sizeof(float) * d);
        std::memcpy(cache->V(l, block, h) + off * d, v + h * d, sizeof(float) * d);
      } else {  // bf16, rounded to nearest even
        Fp32ToBf16Row(k + h * d, d, cache->KBf16(l, block, h) + off * d);
        Fp32ToBf16Row(v + h * d, d, cache->VBf16(l, block, h) + off * d);
      }
      cache->Positions(l, block, h)[off] = ref.pos;
    }
  }

  Attention(l, batch);
  Linear(w.wo, att_.data(), n, xb_.data());
  for (int64_t t = 0; t < n; ++t) AddInPlace(&x_[t * c.hidden], &xb_[t * c.hidden], c.hidden);

  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(&x_[t * c.hidden], w.ffn_norm.f32(), c.hidden, c.rms_eps, &xb_[t * c.hidden]);
  }
  if (fused_gate_up_[l].packed != nullptr) {
    LinearFused(fused_gate_up_[l], xb_.data(), n, {gate_.data(), up_.data()});
  } else {
    Linear(w.w_gate, xb_.data(), n, gate_.data());
    Linear(w.w_up, xb_.data(), n, up_.data());
  }
  SiluMul(gate_.data(), up_.data(), n * c.ffn_hidden);
  Linear(w.w_down, gate_.data(), n, xb_.data());
  for (int64_t t = 0; t < n; ++t) AddInPlace(&x_[t * c.hidden], &xb_[t * c.hidden], c.hidden);
}

// Attention for every token of the step, in parallel over tasks of one KV
// head each. A prefill entry (more than one token: a prompt or a chunk of it)
// runs the tiled PrefillAttention on tiles of PrefillTileTokens(group)
// consecutive tokens; a decode entry (one token) runs PagedAttention, whose
// probabilities a KV policy may observe.
//
// Numerics: PagedAttention is PrefillAttention on a run of one token, and a
// row's arithmetic depends only on its own query and slot (key tiles anchored
// at slot 0), so a token's attention output is bit-identical however its
// prompt is chunked (one token at a time included) and whatever shares its
// batch (the summation order is in prefill_attention.h); with the
// batch-invariant matmuls, so are the logits.
void CpuBackend::Attention(int l, std::span<const ForwardEntry> batch) {
  const ModelConfig& c = weights_->config;
  const int d = c.head_dim;
  const int group = c.group_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  struct Task {
    int64_t t0;    // first token (index into tokens_)
    int32_t n;     // tokens
    int h;         // KV head
    bool prefill;  // PrefillAttention (else PagedAttention, n == 1)
    int64_t cost;  // ~ query rows x keys, for the order of claiming
  };
  std::vector<Task> tasks;
  const int tile = PrefillTileTokens(group);
  int64_t t = 0;
  for (const ForwardEntry& en : batch) {
    const int32_t nt = static_cast<int32_t>(en.tokens.size());
    const bool prefill = nt > 1;
    for (int32_t i = 0; i < nt; i += prefill ? tile : 1) {
      const int32_t n = prefill ? std::min(tile, nt - i) : 1;
      const int64_t cost = int64_t{n} * (tokens_[t + i + n - 1].slot + 1);
      for (int h = 0; h < c.n_kv_heads; ++h) tasks.push_back({t + i, n, h, prefill, cost});
    }
    t += nt;
  }
  // Costliest first: the threads claim tasks in order, so the long causal
  // tiles at the end of a prompt do not come last and leave a thread idle.
  std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.cost > b.cost; });

  auto body = [&](int64_t begin, int64_t end, int thread) {
    std::vector<float>& scores = scores_[thread];
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
      const int32_t n_keys = ref.slot + 1;  // causal: every slot up to its own
      if (scores.size() < static_cast<size_t>(group) * n_keys) scores.resize(static_cast<size_t>(group) * n_keys);
      PagedAttention(&q_[off], group, view, n_keys, scale, scores.data(), &att_[off]);
      // Decode entries only: the tasks of one entry are then distinct KV
      // heads, which a policy may observe concurrently.
      if (entry.policy != nullptr && entry.policy->wants_attention()) {
        entry.policy->ObserveAttention(l, tk.h, scores.data(), group, n_keys);
      }
    }
  };
  if (pool_ != nullptr) {
    pool_->ParallelFor(static_cast<int64_t>(tasks.size()), 1, body);
  } else {
    body(0, static_cast<int64_t>(tasks.size()), 0);
  }
}

}  // namespace beacon
