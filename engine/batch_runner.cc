#include "engine/batch_runner.h"

#include <vector>

namespace beacon {

absl::StatusOr<bool> RunStep(Backend* backend, std::span<Generation* const> gens, const BatchRunnerOptions& options,
                             const std::function<void(size_t, const TokenEvent&)>& on_token) {
  std::vector<ForwardEntry> entries;
  std::vector<size_t> owner;
  for (size_t i = 0; i < gens.size(); ++i) {
    Generation* g = gens[i];
    if (g->finished()) continue;
    entries.push_back(g->NextEntry(options.prefill_chunk));
    owner.push_back(i);
  }
  if (entries.empty()) return false;
  std::vector<float> logits;
  if (absl::Status s = backend->Forward(entries, &logits); !s.ok()) return s;
  const size_t vocab = static_cast<size_t>(backend->config().vocab_size);
  size_t row = 0;  // an entry with all_logits (prompt logprobs) has a row per token
  for (size_t j = 0; j < entries.size(); ++j) {
    const size_t n = entries[j].tokens.size();
    const size_t rows = entries[j].all_logits ? n : 1;
    std::span<const float> entry_logits(logits.data() + row * vocab, rows * vocab);
    row += rows;
    TokenEvent ev = gens[owner[j]]->Advance(static_cast<int32_t>(n), entry_logits);
    if (ev.id >= 0 && on_token) on_token(owner[j], ev);
  }
  return true;
}

absl::Status RunToCompletion(Backend* backend, std::span<Generation* const> gens, const BatchRunnerOptions& options,
                             const std::function<void(size_t, const TokenEvent&)>& on_token) {
  for (;;) {
    absl::StatusOr<bool> more = RunStep(backend, gens, options, on_token);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
  }
}

}  // namespace beacon
