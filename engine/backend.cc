#include "engine/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon {

absl::Status Backend::ForwardGreedy(std::span<const ForwardEntry> batch, std::vector<int32_t>* tokens) {
  std::vector<float> logits;
  if (absl::Status s = Forward(batch, &logits); !s.ok()) return s;
  const int32_t vocab = config().vocab_size;
  tokens->resize(batch.size());
  for (size_t e = 0; e < batch.size(); ++e) {
    const float* row = logits.data() + e * static_cast<size_t>(vocab);
    (*tokens)[e] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvCache>> Backend::MakeKvCache(const KvCacheShape& shape, int32_t num_blocks) {
  return std::make_unique<KvCache>(shape, num_blocks, KvStorage::kHost);
}

absl::StatusOr<Backend::DevicePool> Backend::SizeKvPool(const KvCacheShape&, double, int64_t, int64_t) {
  return absl::UnimplementedError(
      absl::StrCat("device \"", std::string(device()),
                   "\" keeps the KV cache in host memory: size its pool in tokens (--kv-pool-tokens)"));
}

absl::Status ValidateBatch(const ModelConfig& c, std::span<const ForwardEntry> batch, KvStorage storage) {
  for (size_t e = 0; e < batch.size(); ++e) {
    const ForwardEntry& en = batch[e];
    if (en.kv == nullptr || en.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("batch entry %d has no KV sequence or no tokens", e));
    }
    const KvCache* cache = en.kv->cache();
    if (cache->shape().n_layers != c.n_layers || cache->shape().n_kv_heads != c.n_kv_heads ||
        cache->shape().head_dim != c.head_dim) {
      return absl::InvalidArgumentError("KV cache shape does not match the model");
    }
    if (cache->storage() != storage) {
      return absl::InvalidArgumentError(
          absl::StrFormat("batch entry %d: its KV cache holds %s data; make caches with this backend's MakeKvCache", e,
                          cache->storage() == KvStorage::kHost ? "host" : "device"));
    }
    for (size_t j = 0; j < e; ++j) {
      if (batch[j].kv == en.kv) {
        return absl::InvalidArgumentError(absl::StrFormat("batch entries %d and %d share a KV sequence", j, e));
      }
    }
    for (int32_t id : en.tokens) {
      if (id < 0 || id >= c.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("token id %d is outside the vocabulary [0, %d)", id, c.vocab_size));
      }
    }
    const int64_t last = static_cast<int64_t>(en.start_pos) + en.tokens.size();
    if (en.start_pos < 0 || last > c.context_length) {
      return absl::InvalidArgumentError(absl::StrFormat("positions [%d, %d) exceed the model's context length %d",
                                                        en.start_pos, last, c.context_length));
    }
  }
  return absl::OkStatus();
}

absl::Status ReserveBatch(std::span<const ForwardEntry> batch) {
  for (size_t e = 0; e < batch.size(); ++e) {
    absl::Status s = batch[e].kv->Reserve(batch[e].kv->num_slots() + static_cast<int32_t>(batch[e].tokens.size()));
    if (!s.ok()) {
      for (size_t j = 0; j <= e; ++j) batch[j].kv->Truncate(batch[j].kv->num_slots());
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace beacon
