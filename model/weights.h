// Views of a model's weight tensors, in the layout the forward pass consumes.
//
// A matrix is stored row-major with `rows` = output features and `cols` =
// input features (the contiguous dimension, GGUF's ne[0]), so y = W x reads
// W row by row. Matrices may be of any DType (float, the legacy quantised
// types, the K-quants); vectors (norm weights, biases) are always F32
// (loaders convert them).
#ifndef BEACON_MODEL_WEIGHTS_H_
#define BEACON_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "model/model_config.h"

namespace beacon {

struct Tensor {
  DType dtype = DType::kF32;
  int64_t rows = 0;  // 1 for a vector
  int64_t cols = 0;
  const void* data = nullptr;  // not owned; see ModelWeights::keep_alive

  bool empty() const { return data == nullptr; }
  size_t row_bytes() const { return DTypeRowBytes(dtype, cols); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + row_bytes() * static_cast<size_t>(r);
  }
  const float* f32() const { return static_cast<const float*>(data); }
};

struct LayerWeights {
  Tensor attn_norm;       // [hidden]
  Tensor wq, wk, wv, wo;  // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  Tensor bq, bk, bv;      // Qwen2 only: [q_dim], [kv_dim], [kv_dim]
  Tensor q_norm, k_norm;  // Qwen3 only: [head_dim]
  Tensor ffn_norm;        // [hidden]
  Tensor w_gate, w_up;    // [ffn_hidden, hidden]
  Tensor w_down;          // [hidden, ffn_hidden]
};

struct ModelWeights {
  ModelConfig config;
  Tensor tok_embd;     // [vocab, hidden]
  Tensor output_norm;  // [hidden]
  Tensor output;       // [vocab, hidden]; aliases tok_embd when tied
  std::vector<LayerWeights> layers;
  // Whatever owns the bytes the tensors point into (a file mapping, buffers).
  std::vector<std::shared_ptr<const void>> keep_alive;

  // Bytes of all matrices the forward pass reads once per step (what bounds
  // batch-1 decode by memory bandwidth). Counts `output` once even when tied.
  size_t StreamedWeightBytes() const;
  // Elements of those same matrices: the multiply-adds one token costs in
  // them (beacon-bench's compute roofline for batched decode).
  int64_t StreamedWeightElements() const;
};

}  // namespace beacon

#endif  // BEACON_MODEL_WEIGHTS_H_
