#include "engine/cuda/device_weights.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "kernels/cpu/dtype.h"

namespace beacon {
namespace {

// Plans one allocation: each tensor's offset, aligned to 256 bytes (cuBLAS
// and the kernels' vector loads want aligned rows).
struct Piece {
  std::vector<const Tensor*> parts;  // concatenated along rows
  size_t offset = 0;
  size_t elems = 0;
  const __nv_bfloat16** slot = nullptr;
};

size_t Elems(const Tensor& t) { return static_cast<size_t>(t.rows) * t.cols; }

}  // namespace

void ConvertRowsToBf16(const Tensor& t, int64_t row_begin, int64_t row_end, std::vector<uint16_t>* out) {
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(row_end - row_begin) * t.cols);
  uint16_t* dst = out->data() + base;
  if (t.dtype == DType::kBF16) {
    std::memcpy(dst, t.row(row_begin), sizeof(uint16_t) * (row_end - row_begin) * t.cols);
    return;
  }
  // Large matrices convert on several threads: a dequantised 4B-parameter
  // model is ~4e9 conversions, minutes on one core.
  const int64_t rows = row_end - row_begin;
  const int threads = rows * t.cols >= (int64_t{1} << 22)
                          ? static_cast<int>(std::max(1u, std::min(16u, std::thread::hardware_concurrency())))
                          : 1;
  auto work = [&](int64_t r0, int64_t r1) {
    std::vector<float> row(t.cols);
    for (int64_t r = r0; r < r1; ++r) {
      DequantizeRow(t.dtype, t.row(row_begin + r), row.data(), t.cols);
      uint16_t* o = dst + static_cast<size_t>(r) * t.cols;
      for (int64_t i = 0; i < t.cols; ++i) o[i] = Fp32ToBf16(row[i]);
    }
  };
  if (threads == 1) {
    work(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t per = (rows + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    const int64_t r0 = std::min(rows, i * per), r1 = std::min(rows, r0 + per);
    if (r0 < r1) pool.emplace_back(work, r0, r1);
  }
  for (std::thread& th : pool) th.join();
}

absl::Status DeviceWeights::Upload(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  const bool tied = w.output.data == w.tok_embd.data;
  std::vector<Piece> pieces;
  layers_.assign(c.n_layers, DeviceLayerWeights{});
  auto add = [&](std::vector<const Tensor*> parts, const __nv_bfloat16** slot) {
    Piece p;
    p.parts = std::move(parts);
    for (const Tensor* t : p.parts) p.elems += Elems(*t);
    p.slot = slot;
    pieces.push_back(std::move(p));
  };
  add({&w.tok_embd}, &tok_embd_);
  add({&w.output_norm}, &output_norm_);
  if (!tied) add({&w.output}, &output_);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    DeviceLayerWeights& d = layers_[l];
    add({&lw.attn_norm}, &d.attn_norm);
    add({&lw.wq, &lw.wk, &lw.wv}, &d.wqkv);
    if (c.qkv_bias) add({&lw.bq, &lw.bk, &lw.bv}, &d.bqkv);
    if (c.qk_norm) {
      add({&lw.q_norm}, &d.q_norm);
      add({&lw.k_norm}, &d.k_norm);
    }
    add({&lw.wo}, &d.wo);
    add({&lw.ffn_norm}, &d.ffn_norm);
    add({&lw.w_gate, &lw.w_up}, &d.w_gate_up);
    add({&lw.w_down}, &d.w_down);
  }
  size_t total = 0;
  for (Piece& p : pieces) {
    for (const Tensor* t : p.parts) {
      if (t->empty()) return absl::InvalidArgumentError("a weight tensor the model needs is missing");
    }
    p.offset = total;
    total += (p.elems * sizeof(uint16_t) + 255) / 256 * 256;
  }
  if (absl::Status s = memory_.Allocate(total, "model weights (bf16)"); !s.ok()) return s;
  // Upload tensor by tensor through one staging vector.
  std::vector<uint16_t> staging;
  for (Piece& p : pieces) {
    staging.clear();
    for (const Tensor* t : p.parts) ConvertRowsToBf16(*t, 0, t->rows, &staging);
    char* dst = memory_.as<char>() + p.offset;
    BEACON_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst, staging.data(), staging.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
    *p.slot = reinterpret_cast<const __nv_bfloat16*>(dst);
  }
  if (tied) output_ = tok_embd_;
  // Streamed per decode step: every layer matrix and the output head (the
  // embedding table is gathered, not streamed, unless it is the head).
  streamed_bytes_ = 0;
  for (const LayerWeights& lw : w.layers) {
    for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) {
      streamed_bytes_ += Elems(*t) * sizeof(uint16_t);
    }
  }
  streamed_bytes_ += Elems(w.output) * sizeof(uint16_t);
  return absl::OkStatus();
}

}  // namespace beacon
