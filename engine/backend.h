// The engine's compute backend: one forward pass over a ragged batch.
//
// A batch mixes sequences that prefill (many tokens, possibly one chunk of a
// longer prompt) and sequences that decode (one token). Each entry appends
// its tokens to its own paged KV sequence. CPU and CUDA implement this.
#ifndef BEACON_ENGINE_BACKEND_H_
#define BEACON_ENGINE_BACKEND_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "kv/kv_cache.h"
#include "kv/kv_policy.h"

namespace beacon {

struct ForwardEntry {
  SequenceKv* kv = nullptr;          // the sequence's slots; tokens are appended
  std::span<const int32_t> tokens;   // new tokens, >= 1
  int32_t start_pos = 0;             // RoPE position of tokens[0]
  bool all_logits = false;           // logits for every token, not only the last
  // The sequence's KV policy, if it compresses: it is shown every token's
  // pre-RoPE queries and, on decode steps (one token), the attention
  // probabilities when it asks for them (kv/kv_policy.h).
  KvPolicy* policy = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs the model over `batch`. Appends each entry's K/V to its sequence
  // (reserving blocks as needed) and writes logits, row-major
  // [rows][vocab_size], rows in batch order: n_tokens rows for an entry with
  // all_logits, else one (its last token).
  // Errors (INVALID_ARGUMENT for a token id outside the vocabulary or a
  // position past the context; RESOURCE_EXHAUSTED when the KV pool cannot
  // hold the new slots) leave every sequence as it was.
  virtual absl::Status Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) = 0;

  virtual const ModelConfig& config() const = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_BACKEND_H_
