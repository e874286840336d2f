#include "model/weights.h"

namespace beacon {

// Vectors (norms, biases) are left out: they are a rounding error next to the
// matrices. The token embedding is left out too: a step reads one row of it
// per token, not the whole table, unless it doubles as the output projection,
// in which case it is counted once, as `output`.
size_t ModelWeights::StreamedWeightBytes() const {
  size_t total = output.bytes();
  for (const LayerWeights& l : layers) {
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      total += t->bytes();
    }
  }
  return total;
}

int64_t ModelWeights::StreamedWeightElements() const {
  int64_t total = output.rows * output.cols;
  for (const LayerWeights& l : layers) {
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      total += t->rows * t->cols;
    }
  }
  return total;
}

}  // namespace beacon
