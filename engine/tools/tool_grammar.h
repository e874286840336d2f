// The grammar that makes a model's answer a tool call in its own format
// (tool_format.h), as an xgrammar structural tag: each tool a tag whose
// begin names it and whose content is its arguments' JSON schema.
//   required   one or more calls, nothing else (one with parallel off);
//   named      exactly one call of that function;
//   auto with constrain_auto: free text until the format's start marker,
//              then a valid call of one of the tools, then free text again
//              (hermes: a ```json fence starts a call too, as the parser
//              reads it).
// auto (unconstrained) and none have no grammar: the answer is free and is
// parsed afterwards (tool_parser.h).
#ifndef BEACON_ENGINE_TOOLS_TOOL_GRAMMAR_H_
#define BEACON_ENGINE_TOOLS_TOOL_GRAMMAR_H_

#include <optional>

#include "engine/grammar/grammar_spec.h"
#include "engine/tools/tool_format.h"
#include "engine/tools/tool_spec.h"

namespace beacon {

// REQUIRES tools.Validate().ok(). nullopt when the choice needs no grammar.
std::optional<GrammarSpec> ToolGrammar(ToolCallFormat format, const ToolRequest& tools);

}  // namespace beacon

#endif  // BEACON_ENGINE_TOOLS_TOOL_GRAMMAR_H_
