#include "eval/free_run.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/generation.h"
#include "engine/step_executor.h"

namespace beacon::eval {

absl::StatusOr<FreeRunResult> RunTraceAndFreeRuns(Runtime* rt, const std::vector<int32_t>& prompt,
                                                  std::span<const PolicySpec> specs, int32_t tokens,
                                                  int32_t prefill_chunk, const StepProgress& progress) {
  const ModelConfig& cfg = rt->config();
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  if (prompt.empty()) return absl::InvalidArgumentError("prompt: no tokens");
  if (tokens < 2) return absl::InvalidArgumentError("tokens: must be >= 2");
  if (int64_t{n_prompt} + tokens > cfg.context_length) {
    return absl::InvalidArgumentError(absl::StrCat("tokens: prompt (", n_prompt, ") + ", tokens,
                                                   " exceeds the model's context ", cfg.context_length));
  }

  // Sequence 0 is the full cache; sequence i + 1 is specs[i].
  std::vector<GenerationOptions> options(specs.size() + 1);
  int64_t slots = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    GenerationOptions& o = options[i];
    o.sampling.temperature = 0.0f;  // greedy
    o.max_tokens = tokens;
    o.ignore_eos = true;
    if (i > 0) o.kv = specs[i - 1].options;
    // One spare block per sequence for block rounding.
    slots += SequenceCompressor::PeakSlots(o.kv, n_prompt, tokens) + 16;
  }
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(slots);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  std::vector<std::unique_ptr<Generation>> gens;
  for (const GenerationOptions& o : options) {
    absl::StatusOr<std::unique_ptr<Generation>> g = Generation::Create(rt->tokenizer(), cache.get(), cfg, prompt, o);
    if (!g.ok()) return g.status();
    (*g)->set_thread_pool(rt->backend()->host_pool());
    gens.push_back(std::move(*g));
  }

  FreeRunResult result;
  result.agreement.assign(specs.size(), -1);
  std::vector<size_t> alive(gens.size());
  for (size_t i = 0; i < alive.size(); ++i) alive[i] = i;
  StepExecutor executor(rt->backend());  // the step beacon-serve runs
  std::vector<ExecItem> items;
  std::vector<ExecResult> results;
  while (!gens[0]->finished()) {
    items.clear();
    for (size_t i : alive) items.push_back({gens[i].get(), prefill_chunk});
    if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;
    std::vector<int32_t> ids(alive.size(), -1);
    for (size_t j = 0; j < alive.size(); ++j) ids[j] = results[j].event.id;
    if (ids[0] < 0) continue;  // mid-prompt chunk
    result.trace.push_back(ids[0]);
    std::vector<size_t> next = {0};
    for (size_t j = 1; j < alive.size(); ++j) {
      Generation& g = *gens[alive[j]];
      if (ids[j] != ids[0]) {
        // Diverged: its generated tokens but the last matched the trace.
        result.agreement[alive[j] - 1] = static_cast<int32_t>(g.generated().size()) - 1;
        g.kv()->Release();
      } else if (g.finished()) {
        result.agreement[alive[j] - 1] = static_cast<int32_t>(g.generated().size());
      } else {
        next.push_back(alive[j]);
      }
    }
    alive.swap(next);
    if (progress) progress(static_cast<int32_t>(result.trace.size()), tokens, static_cast<int>(alive.size()));
  }
  // Survivors of the whole trace agree everywhere.
  for (size_t j = 1; j < alive.size(); ++j) result.agreement[alive[j] - 1] = tokens;
  return result;
}

}  // namespace beacon::eval
