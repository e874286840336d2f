#include "engine/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantize.h"

namespace beacon {
namespace {

// A packed matrix's source bytes are not read again by this backend (the
// forward multiplies with the packed copy only), so their whole pages go
// back to the kernel: resident memory then holds the weights once, not
// twice (the 1.5B model: 1.04 GB of GGUF pages besides the 1.0 GB packed
// copy; issue 34). MADV_PAGEOUT is safe on any memory: pages of the GGUF's
// read-only file mapping are dropped and read from the file again if
// anything touches them later (a tied embedding's rows, another backend on
// the same weights); anonymous pages would go to swap, or stay where there
// is none. Advice only: a kernel without it changes nothing.
void ReleaseSourcePages(const Tensor& t) {
#if defined(__linux__) && defined(MADV_PAGEOUT)
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(t.data);
  const uintptr_t begin = (start + page - 1) / page * page, end = (start + t.bytes()) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)t;
#endif
}

}  // namespace

CpuBackend::CpuBackend(const ModelWeights* weights, ThreadPool* pool) : weights_(weights), pool_(pool) {
  const ModelConfig& c = weights_->config;
  // The model's (possibly scaled) RoPE table: the same one the CUDA backend
  // uploads and the KV policies rotate stored queries with.
  RopeTable rope = c.RopeFrequencies();
  inv_freq_ = std::move(rope.inv_freq);
  rope_attention_factor_ = rope.attention_factor;
  auto pack = [&](const Tensor& t) {
    if (t.empty() || !PackedMatrix::Supported(t.dtype) || packed_.contains(t.data)) return;
    packed_[t.data] = PackedMatrix::Pack(t.dtype, t.rows, t.cols, t.data, pool_);
    ReleaseSourcePages(t);
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
  for (const Tensor* t : parts) ReleaseSourcePages(*t);
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
      } else if (cache->dtype() == DType::kBF16) {  // rounded to nearest even
        Fp32ToBf16Row(k + h * d, d, cache->KBf16(l, block, h) + off * d);
        Fp32ToBf16Row(v + h * d, d, cache->VBf16(l, block, h) + off * d);
      } else {  // q8_0: a scale per 32 elements (quantize.h)
        const size_t row = cache->shape().row_bytes();
        QuantizeRow(DType::kQ8_0, k + h * d, static_cast<uint8_t*>(cache->KData(l, block, h)) + off * row, d);
        QuantizeRow(DType::kQ8_0, v + h * d, static_cast<uint8_t*>(cache->VData(l, block, h)) + off * row, d);
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

}  // namespace beacon
