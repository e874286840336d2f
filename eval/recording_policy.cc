#include "eval/recording_policy.h"

#include "eval/metrics.h"

namespace beacon::eval {

RecordingPolicy::RecordingPolicy(const PolicyModelInfo& model) : n_kv_heads_(model.n_kv_heads) {
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

double AttentionRecall(const RecordingPolicy& ref, const SequenceKv& kv, const PolicyModelInfo& m,
                       std::vector<int32_t>* positions) {
  double sum = 0.0;
  for (int l = 0; l < m.n_layers; ++l) {
    const KeysView keys(kv.cache(), &kv, l);
    for (int h = 0; h < m.n_kv_heads; ++h) {
      positions->resize(keys.n_slots());
      for (int32_t s = 0; s < keys.n_slots(); ++s) (*positions)[s] = keys.position(h, s);
      for (int g = 0; g < m.group(); ++g) sum += MassOnPositions(ref.Probs(l, h, g), *positions);
    }
  }
  return sum / (static_cast<double>(m.n_layers) * m.n_heads);
}

}  // namespace beacon::eval
