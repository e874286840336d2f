// The parts of PrepareRequest (serve_request.h) that structured output and
// tool calling add: the chat as the template sees it with the request's
// tools (engine/tools/tool_prompt.h), the grammar the answer must match
// (response_format / structured_outputs, or a forced tool call) compiled on
// the server's GrammarCompiler, and the thinking budget reasoning_effort
// names.
//
// Thread ownership: front-end threads, as PrepareRequest; compiling waits on
// the compiler's own threads (engine/grammar/grammar_compiler.h), never the
// engine's.
#ifndef BEACON_ENGINE_SERVING_STRUCTURED_INPUT_H_
#define BEACON_ENGINE_SERVING_STRUCTURED_INPUT_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "engine/serving/serve_request.h"
#include "engine/tools/tool_prompt.h"

namespace beacon {

// The messages and template variables a chat request renders with: its
// tools shown (unless tool_choice is none) and its tool history in a form
// the template renders. INVALID_ARGUMENT naming the field for invalid tools
// (ToolRequest::Validate), chat_template_kwargs that set `tools` while the
// request has tools, or tools on a server without tool calling.
absl::StatusOr<ToolChat> ChatForTemplate(const ServeRequest& r, const ServeLimits& limits);

// Sets p->options.grammar (the request's structured output, else the
// grammar of a required or named tool call) and p->tool_format / tool_names
// (the answer is parsed for calls). INVALID_ARGUMENT naming the field for a
// spec the compiler refuses or a server without a compiler;
// RESOURCE_EXHAUSTED when the compiler's queue is full.
absl::Status PrepareStructured(const ServeRequest& r, const ServeLimits& limits, PreparedRequest* p);

// The thinking budget of a chat request: max_reasoning_tokens when given,
// else the tokens reasoning_effort names (ServeLimits::reasoning_effort_tokens),
// else 0 (no limit). INVALID_ARGUMENT for an effort that is not low, medium or
// high. An effort on a model without a reasoning parser is no budget (0): it
// is not an error, since clients send it to every model.
absl::StatusOr<int64_t> ReasoningBudget(const ServeRequest& r, const ServeLimits& limits);

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_STRUCTURED_INPUT_H_
