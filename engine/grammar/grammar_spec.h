// What a request asks its answer to match: a JSON schema, any JSON object, a
// regular expression, an EBNF grammar, one of a list of strings, or an
// xgrammar structural tag (tool calls in a model's own format,
// engine/tools/tool_grammar.h). The OpenAI routes (response_format, vLLM's
// structured_outputs, tools) and the gRPC API (beacon.v1 StructuredOutput)
// both fill one; GrammarCompiler (grammar_compiler.h) turns it into the
// token masks the sampler applies once the reasoning has ended.
//
// A spec is plain data, validated for size and shape here (Validate) before
// any compiler sees it; whether the schema or grammar itself is valid is the
// compiler's finding.
#ifndef BEACON_ENGINE_GRAMMAR_GRAMMAR_SPEC_H_
#define BEACON_ENGINE_GRAMMAR_GRAMMAR_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace beacon {

enum class GrammarKind : uint8_t {
  kJsonObject,     // any JSON object (OpenAI's json_object mode)
  kJsonSchema,     // `source` is a JSON schema
  kRegex,          // `source` is a regular expression (xgrammar's dialect: ECMAScript-like)
  kEbnf,           // `source` is an EBNF grammar with a `root` rule (xgrammar's GBNF dialect)
  kChoice,         // exactly one of `choices`
  kStructuralTag,  // `source` is an xgrammar structural tag (a JSON object with "type": "structural_tag")
};

// "json_object", "json_schema", "regex", "grammar", "choice", "structural_tag".
std::string_view GrammarKindName(GrammarKind kind);

// Bounds on what a client may send: checked before compiling (Validate), so
// that the compiler only ever sees inputs of bounded size. Compile time is
// bounded by GrammarCompilerOptions::compile_timeout_ms.
struct GrammarLimits {
  int64_t max_source_bytes = 64 << 10;  // a schema, regex, grammar or structural tag
  int32_t max_choices = 256;
  int64_t max_choice_bytes = 1024;  // each choice
};

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string source;                // see GrammarKind; empty for kJsonObject and kChoice
  std::vector<std::string> choices;  // kChoice
  // kJsonSchema: OpenAI's `strict` (true: properties and items the schema
  // does not name are not generated, as xgrammar's strict mode; false: the
  // schema's own additionalProperties decide).
  bool strict = true;
  // The request field the spec came from, which errors name
  // ("response_format.json_schema.schema", "structured_outputs.regex").
  std::string field;

  // INVALID_ARGUMENT naming `field` for a source or a choice past `limits`,
  // no choices, an empty choice, or text that is not UTF-8.
  absl::Status Validate(const GrammarLimits& limits) const;
  // Equal keys compile to the same grammar (the compiler's cache key).
  std::string CacheKey() const;
};

// kChoice as an EBNF grammar: root ::= "a" | "b" | ..., each choice a string
// literal with quotes, backslashes and control characters escaped.
std::string ChoiceEbnf(const std::vector<std::string>& choices);

}  // namespace beacon

#endif  // BEACON_ENGINE_GRAMMAR_GRAMMAR_SPEC_H_
