// The OpenAI fields of structured output and tool calling, parsed into a
// ServeRequest (its `structured` and `tools`, engine/grammar/grammar_spec.h and
// engine/tools/tool_spec.h):
//   response_format     {"type": "text"} | {"type": "json_object"} |
//                       {"type": "json_schema", "json_schema": {"name",
//                       "schema", "strict", "description"}} |
//                       {"type": "structural_tag", "format": {...}}
//                       (xgrammar's, as vLLM takes it)            chat
//   structured_outputs  vLLM's: exactly one of json (a schema, object or
//                       text), regex, choice, grammar (EBNF),
//                       json_object (true), structural_tag         both
//   tools, tool_choice ("none" | "auto" | "required" |
//                       {"type": "function", "function": {"name"}}),
//                       parallel_tool_calls, and the deprecated functions /
//                       function_call (mapped onto them)          chat
//   constrain_tool_calls  this server's: tool_choice auto under a grammar
//                       too (a call, once begun, is valid)        chat
// Shapes and types are checked here, naming the field; sizes, names and
// compiling are PrepareRequest's (structured_input.h).
#ifndef BEACON_SERVER_OPENAI_OPENAI_STRUCTURED_H_
#define BEACON_SERVER_OPENAI_OPENAI_STRUCTURED_H_

#include "absl/status/status.h"
#include "engine/serving/serve_request.h"
#include "nlohmann/json.hpp"
#include "server/openai/openai_fields.h"

namespace beacon {

// `body` parsed with its objects' order kept (the schemas' property order
// is the order a strict grammar generates).
absl::Status ParseStructuredFields(const nlohmann::ordered_json& body, OpenAiEndpoint endpoint, ServeRequest* r);

// One message's tool fields: an assistant turn's tool_calls, a tool turn's
// tool_call_id and name. `field` is "messages[i]".
absl::Status ParseMessageToolFields(const nlohmann::json& message, const std::string& field, ChatMessage* m);

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_OPENAI_STRUCTURED_H_
