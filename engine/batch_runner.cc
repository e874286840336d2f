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
  for (size_t j = 0; j < entries.size(); ++j) {
    std::span<const float> row(logits.data() + j * vocab, vocab);
    TokenEvent ev = gens[owner[j]]->Advance(static_cast<int32_t>(entries[j].tokens.size()), row);
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
