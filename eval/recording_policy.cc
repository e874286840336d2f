#include "eval/recording_policy.h"

#include <algorithm>

namespace beacon::eval {

RecordingPolicy::RecordingPolicy(const PolicyModelInfo& model)
    : n_kv_heads_(model.n_kv_heads) {
  probs_.resize(static_cast<size_t>(model.n_layers) * model.n_kv_heads);
  n_slots_.assign(probs_.size(), 0);
}

void RecordingPolicy::ObserveAttention(int layer, int kv_head, const float* probs, int group, int32_t n_slots) {
  std::vector<float>& buf = probs_[Index(layer, kv_head)];
  buf.assign(probs, probs + static_cast<size_t>(group) * n_slots);
  n_slots_[Index(layer, kv_head)] = n_slots;
}

void RecordingPolicy::Score(int, int, const KeysView& keys, int32_t, float* scores) {
  for (int32_t s = 0; s < keys.n_slots(); ++s) scores[s] = static_cast<float>(s);
}

std::span<const float> RecordingPolicy::Probs(int layer, int kv_head, int g) const {
  const size_t i = Index(layer, kv_head);
  const size_t n = static_cast<size_t>(n_slots_[i]);
  if (n == 0) return {};
  return std::span<const float>(probs_[i]).subspan(static_cast<size_t>(g) * n, n);
}

}  // namespace beacon::eval
