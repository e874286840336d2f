// Per-prompt checkpoints of `beacon-eval model`: a run over 20 prompts at
// T=2048 takes hours on a small machine, so each finished prompt is saved
// as DIR/<prompt id>.json and a later run with the same settings reuses it
// instead of recomputing (`--resume`). Together the files are also the raw
// per-prompt data of the fidelity tables (docs/fidelity.md).
//
// A checkpoint is reused only when its key equals the run's key: the model,
// KV cache type, T, interval, prefill chunk, the configurations' names and
// the prompt's own text. Anything else that changes results (the engine's
// code) is not in the key: a run after such a change must not --resume.
#ifndef BEACON_EVAL_MODEL_CHECKPOINT_H_
#define BEACON_EVAL_MODEL_CHECKPOINT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "eval/model_eval.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {

// NaN metrics ("post" values of a configuration that never evicted) are
// written as null and read back as NaN.
nlohmann::json PromptSummaryToJson(const PromptSummary& p);
// INVALID_ARGUMENT naming the missing or mistyped field.
absl::StatusOr<PromptSummary> PromptSummaryFromJson(const nlohmann::json& j);

// Writes dir/<id>.json ({"key": key, "summary": ...}) atomically (a
// temporary file renamed over it), creating dir. INTERNAL naming the file on
// failure.
absl::Status SaveCheckpoint(const std::string& dir, const nlohmann::json& key, const PromptSummary& p);

// The summary saved for prompt `id` under `key`; nullopt when there is no
// file or its key differs (the caller recomputes). INVALID_ARGUMENT naming
// the file when it exists with the same key but cannot be parsed.
absl::StatusOr<std::optional<PromptSummary>> LoadCheckpoint(const std::string& dir, const std::string& id,
                                                            const nlohmann::json& key);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_MODEL_CHECKPOINT_H_
