// The Jinja2 lexer: template source to a flat token stream, with the
// whitespace rules of HF's chat-template environment applied here (so the
// parser sees final text): trim_blocks and lstrip_blocks on, `-` and `+`
// modifiers on tags, keep_trailing_newline off, newlines normalised to "\n".
#ifndef BEACON_MODEL_TOKENIZER_JINJA_LEXER_H_
#define BEACON_MODEL_TOKENIZER_JINJA_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace beacon::jinja {

struct Token {
  enum class Kind {
    kText,        // literal template text (value)
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword (value)
    kString,      // string literal, escapes resolved (value)
    kInt,         // integer literal (value: digits)
    kFloat,       // float literal (value)
    kOp,          // operator or punctuation (value)
    kEof,
  };
  Kind kind;
  std::string value;
  int line = 1;    // 1-based, of the token's first character
  int column = 1;  // 1-based, in bytes
};

// INVALID_ARGUMENT naming line and column for an unterminated tag, comment
// or string, or a character that starts no token.
absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_LEXER_H_
