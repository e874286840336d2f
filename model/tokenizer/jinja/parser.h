// The Jinja2 parser: tokens (lexer.h) to a syntax tree (ast.h) by recursive
// descent, with jinja2's operator precedence. Nesting is bounded
// (kMaxParseDepth) so a hostile template is an error, never a stack overflow.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_PARSER_H_
#define BEACON_MODEL_TOKENIZER_JINJA_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "model/tokenizer/jinja/ast.h"

namespace beacon::jinja {

inline constexpr int kMaxParseDepth = 200;

// INVALID_ARGUMENT "template line L, column C: ..." on a syntax error.
absl::StatusOr<Body> Parse(std::string_view source);

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_PARSER_H_
