// Python's str operations as templates use them, on UTF-8 bytes. Case
// mapping is ASCII only; white space is ASCII white space.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_STRINGS_H_
#define BEACON_MODEL_TOKENIZER_JINJA_STRINGS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "model/tokenizer/jinja/ast.h"

namespace beacon::jinja {

inline constexpr std::string_view kWhitespace = " \t\n\r\f\v";

// str.strip(chars) / lstrip / rstrip: `chars` is a set of bytes.
std::string StripChars(std::string_view s, std::string_view chars, bool left, bool right);
// str.split(sep, maxsplit) with a non-empty sep (an empty one is an error).
Json Split(std::string_view s, std::string_view sep, int64_t maxsplit);
// str.split() with no separator: runs of white space, no empty parts.
Json SplitWhitespace(std::string_view s, int64_t maxsplit);
std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);
std::string Title(std::string_view s);
std::string Capitalize(std::string_view s);
// str.replace(old, new, count); count < 0: all.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_STRINGS_H_
