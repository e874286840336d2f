// Tool calling, protocol-neutral: the tools a chat request offers the model
// and how it may use them (OpenAI's tools, tool_choice and
// parallel_tool_calls; beacon.v1's Tool and ToolChoice). The OpenAI routes
// and the gRPC service fill a ToolRequest; PrepareRequest validates it
// (Validate), renders the tools into the prompt (tool_prompt.h), and, for
// `required` or a named function, compiles the grammar that makes the
// answer a call (tool_grammar.h). The answer's text is parsed back into
// calls (tool_parser.h).
#ifndef BEACON_ENGINE_TOOLS_TOOL_SPEC_H_
#define BEACON_ENGINE_TOOLS_TOOL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace beacon {

struct ToolDefinition {
  std::string name;         // [A-Za-z0-9_-], 1 to 64 characters (OpenAI's rule)
  std::string description;  // may be empty
  // The arguments' JSON schema as JSON text ("" or "{}": any object).
  std::string parameters = "{}";
  bool strict = false;  // OpenAI's function.strict: no arguments the schema does not name
};

struct ToolChoice {
  enum class Mode : uint8_t {
    kNone,      // never call: the tools are not shown to the model
    kAuto,      // the model decides; its text is parsed into calls
    kRequired,  // at least one call (grammar-constrained)
    kNamed,     // exactly this function (grammar-constrained)
  };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed
};

// Bounds on what a client may send (beacon-serve flags --max-tools, ...).
struct ToolLimits {
  int32_t max_tools = 128;  // OpenAI's limit
  int64_t max_description_bytes = 8 << 10;
  int64_t max_parameters_bytes = 32 << 10;  // one tool's schema
  int64_t max_total_bytes = 256 << 10;      // every tool's name, description and schema
};

struct ToolRequest {
  std::vector<ToolDefinition> tools;  // empty: no tools
  ToolChoice choice;                  // kAuto when tools are given and no choice
  bool parallel = true;               // parallel_tool_calls: more than one call per answer
  // tool_choice auto under a grammar too: free text, but a call once begun
  // must be one of the tools with valid arguments (this server's extension,
  // `constrain_tool_calls`).
  bool constrain_auto = false;

  bool active() const { return !tools.empty() && choice.mode != ToolChoice::Mode::kNone; }
  // INVALID_ARGUMENT naming the field ("tools[2].function.name",
  // "tool_choice") for: more tools than allowed, a name that is not OpenAI's
  // shape or given twice, sizes past `limits`, parameters that are not a
  // JSON object, or a named choice that is not among the tools, or any
  // choice but none/auto without tools.
  absl::Status Validate(const ToolLimits& limits) const;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_TOOLS_TOOL_SPEC_H_
