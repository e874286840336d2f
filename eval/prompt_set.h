// The bundled evaluation prompts: a JSON-lines file, one object per line,
//   {"id": "plan_garden", "prompt": "...", "system": "..."}
// where "system" is optional. Blank lines and lines starting with '#' are
// skipped. The prompts are sent as one user turn of the model's chat
// template.
#ifndef BEACON_EVAL_PROMPT_SET_H_
#define BEACON_EVAL_PROMPT_SET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace beacon::eval {

struct EvalPrompt {
  std::string id;
  std::string prompt;
  std::string system;  // empty: no system turn
};

// NOT_FOUND when the file cannot be read; INVALID_ARGUMENT naming the line
// for malformed JSON, a missing or empty "id"/"prompt", or a duplicate id;
// INVALID_ARGUMENT for a file with no prompts.
absl::StatusOr<std::vector<EvalPrompt>> LoadPrompts(const std::string& path);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_PROMPT_SET_H_
