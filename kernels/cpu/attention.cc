#include "kernels/cpu/attention.h"

#include <cstring>

#include "kernels/cpu/ops.h"

namespace beacon {

void PagedAttention(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys,
                    float scale, float* scores, float* out) {
  const int d = kv.head_dim;
  for (int32_t s = 0; s < n_keys; ++s) {
    const float* k = kv.key(s);
    for (int g = 0; g < n_q_heads; ++g) scores[g * n_keys + s] = scale * Dot(q + g * d, k, d);
  }
  for (int g = 0; g < n_q_heads; ++g) SoftmaxInPlace(scores + g * n_keys, n_keys);
  std::memset(out, 0, sizeof(float) * n_q_heads * d);
  for (int32_t s = 0; s < n_keys; ++s) {
    const float* v = kv.value(s);
    for (int g = 0; g < n_q_heads; ++g) Axpy(scores[g * n_keys + s], v, out + g * d, d);
  }
}

}  // namespace beacon
