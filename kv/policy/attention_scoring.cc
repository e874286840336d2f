#include "kv/policy/attention_scoring.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/key_logits.h"
#include "kernels/cpu/matmul_tiled.h"
#include "kernels/cpu/ops.h"

namespace beacon {

QueryRotator::QueryRotator(const PolicyModelInfo& model)
    : head_dim_(model.head_dim),
      interleaved_(model.rope_interleaved),
      rope_(model.rope.inv_freq.empty() ? MakeRopeTable(model.rope_theta, model.head_dim) : model.rope) {
  assert(static_cast<int>(rope_.inv_freq.size()) == head_dim_ / 2);
}

void QueryRotator::Rotate(const float* q, int32_t position, float* out) const {
  if (out != q) std::memcpy(out, q, sizeof(float) * head_dim_);
  Rope(out, head_dim_, position, rope_.inv_freq.data(), interleaved_, rope_.attention_factor);
}

void QueryRotator::Table(int32_t position, float* cs) const {
  RopeCosSin(head_dim_, position, rope_.inv_freq.data(), rope_.attention_factor, cs);
}

void QueryRotator::Apply(const float* q, const float* cs, float* out) const {
  if (out != q) std::memcpy(out, q, sizeof(float) * head_dim_);
  RopeRotate(out, head_dim_, cs, interleaved_);
}

RecentQueryRing::RecentQueryRing(int capacity, int n_heads, int head_dim)
    : capacity_(capacity),
      n_heads_(n_heads),
      head_dim_(head_dim),
      data_(static_cast<size_t>(capacity) * n_heads * head_dim),
      positions_(capacity) {}

void RecentQueryRing::Push(const float* q, int32_t position) {
  std::memcpy(data_.data() + static_cast<size_t>(next_) * n_heads_ * head_dim_, q,
              sizeof(float) * n_heads_ * head_dim_);
  positions_[next_] = position;
  next_ = (next_ + 1) % capacity_;
  count_ = std::min(count_ + 1, capacity_);
}

void KeysView::GatherF32(int kv_head, std::vector<float>* out) const {
  const int32_t n = n_slots();
  const int d = head_dim();
  const int bs = block_size();
  out->resize(static_cast<size_t>(n) * d);
  // A block's slots are contiguous: one widening per block run.
  for (int32_t s0 = 0; s0 < n; s0 += bs) {
    const int32_t rows = std::min<int32_t>(bs, n - s0);
    DequantizeRowFast(dtype(), key_data(kv_head, s0), out->data() + static_cast<size_t>(s0) * d,
                      static_cast<int64_t>(rows) * d);
  }
}

void AttentionScores(const float* queries, int n_queries, const KeysView& keys, int kv_head, ScoreAggregate aggregate,
                     float* scores, std::vector<float>* scratch, const int32_t* query_positions, bool bf16_products) {
  const int32_t n = keys.n_slots();
  if (n <= 0) return;
  const int d = keys.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  scratch->resize(static_cast<size_t>(n_queries) * n);
  float* logits = scratch->data();
  // Keys are contiguous within a cache block: each block is a small matrix
  // (f32 or bf16, the cache's type), multiplied with all queries at once.
  // A bf16 cache where the build has AVX-512 BF16: bf16 products with the
  // queries rounded to bf16 (key_logits.h; twice the f32 kernel's rate, the
  // logits half an eviction's cost on the 1.5B model; issue 34). Else
  // transposed with f32 FMAs where the build has AVX-512 (about 2x the
  // register-tiled kernel on an eviction's shape), else tiled.
  const int bs = keys.block_size();
  const bool bf16 =
      bf16_products && keys.dtype() == DType::kBF16 && bs <= kKeyLogitsMaxRows && KeyBlockLogitsBf16Supported(d);
  const bool transposed = bs <= kKeyLogitsMaxRows && KeyBlockLogitsSupported(keys.dtype(), d);
  thread_local std::vector<uint16_t> queries_bf16;
  if (bf16) {
    queries_bf16.resize(static_cast<size_t>(n_queries) * d);
    Fp32ToBf16Row(queries, static_cast<int64_t>(n_queries) * d, queries_bf16.data());
  }
  for (int32_t s0 = 0; s0 < n; s0 += bs) {
    const int32_t rows = std::min<int32_t>(bs, n - s0);
    if (bf16) {
      KeyBlockLogitsBf16(static_cast<const uint16_t*>(keys.key_data(kv_head, s0)), rows, d, queries_bf16.data(),
                         n_queries, logits + s0, n);
    } else if (transposed) {
      KeyBlockLogits(keys.dtype(), keys.key_data(kv_head, s0), rows, d, queries, n_queries, logits + s0, n);
    } else {
      MatMulRowsTiled(MatrixView{keys.dtype(), rows, d, keys.key_data(kv_head, s0)}, queries, n_queries, 0, rows,
                      logits + s0, n);
    }
  }
  for (size_t i = 0; i < static_cast<size_t>(n_queries) * n; ++i) logits[i] *= scale;
  std::fill(scores, scores + n, 0.0f);
  // The slots' positions, read once for every query's mask; a query at or
  // past the newest of them (a beacon, most recent queries) masks nothing.
  thread_local std::vector<int32_t> key_pos;
  int32_t newest = std::numeric_limits<int32_t>::min();
  if (query_positions != nullptr) {
    key_pos.resize(n);
    for (int32_t s = 0; s < n; ++s) {
      key_pos[s] = keys.position(kv_head, s);
      newest = std::max(newest, key_pos[s]);
    }
  }
  for (int j = 0; j < n_queries; ++j) {
    float* p = logits + static_cast<size_t>(j) * n;
    if (query_positions != nullptr && query_positions[j] < newest) {
      // Causal: keys newer than the query were not there when it attended;
      // masked to -inf, they get probability exactly 0.
      bool any = false;
      for (int32_t s = 0; s < n; ++s) {
        if (key_pos[s] > query_positions[j]) {
          p[s] = -std::numeric_limits<float>::infinity();
        } else {
          any = true;
        }
      }
      if (!any) continue;
    }
    SoftmaxInPlaceFast(p, n);
    // One loop per aggregate, so each vectorises.
    if (aggregate == ScoreAggregate::kMax) {
      for (int32_t s = 0; s < n; ++s) scores[s] = std::max(scores[s], p[s]);
    } else {
      for (int32_t s = 0; s < n; ++s) scores[s] += p[s];
    }
  }
  if (aggregate == ScoreAggregate::kMean && n_queries > 0) {
    for (int32_t s = 0; s < n; ++s) scores[s] /= static_cast<float>(n_queries);
  }
}

void MaxPool1D(float* scores, int32_t n, int kernel) {
  if (kernel <= 1 || n == 0) return;
  const int half = kernel / 2;
  std::vector<float> in(scores, scores + n);
  for (int32_t s = 0; s < n; ++s) {
    const int32_t lo = std::max<int32_t>(0, s - half), hi = std::min<int32_t>(n - 1, s + half);
    float m = in[lo];
    for (int32_t t = lo + 1; t <= hi; ++t) m = std::max(m, in[t]);
    scores[s] = m;
  }
}

}  // namespace beacon
