// UTF-8 decoding/encoding and code point classes for the pre-tokenizers.
//
// The decoder deliberately reproduces llama.cpp's lenient rules (the
// tokenizer's oracle), not strict UTF-8 validation: a byte that cannot start
// a complete sequence becomes U+FFFD and decoding resumes at the next byte;
// structurally well-formed sequences are accepted as they are, overlong forms
// and surrogates included. Strict validation, for output, is
// `Utf8CompletePrefix` / `SanitizeUtf8`, used by the detokenizer.
#ifndef BEACON_MODEL_TOKENIZER_UNICODE_H_
#define BEACON_MODEL_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace beacon {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Code point class flags. Exactly one of the category bits is set for every
// code point; kCpWhitespace is added for the Unicode White_Space property.
// The values are what tools/gen_unicode_tables.py writes.
enum CodepointFlag : uint16_t {
  kCpUndefined = 0x0001,    // unassigned (Cn)
  kCpNumber = 0x0002,       // \p{N}
  kCpLetter = 0x0004,       // \p{L}
  kCpSeparator = 0x0008,    // \p{Z}
  kCpMark = 0x0010,         // \p{M}
  kCpPunctuation = 0x0020,  // \p{P}
  kCpSymbol = 0x0040,       // \p{S}
  kCpControl = 0x0080,      // \p{C} other than Cn
  kCpCategoryMask = 0x00FF,
  kCpWhitespace = 0x0100,  // \s
};

// Flags of one code point; code points above U+10FFFF are kCpUndefined.
uint16_t CodepointFlags(uint32_t cp);

inline bool IsLetter(uint16_t flags) { return (flags & kCpLetter) != 0; }
inline bool IsNumber(uint16_t flags) { return (flags & kCpNumber) != 0; }
inline bool IsWhitespace(uint16_t flags) { return (flags & kCpWhitespace) != 0; }

// The Unicode version the generated table follows.
const char* UnicodeTableVersion();

// Decodes `text` the way llama.cpp does (see the file comment). Never fails.
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Appends the UTF-8 encoding of `cp` (code points above U+10FFFF are written
// as U+FFFD).
void AppendUtf8(uint32_t cp, std::string* out);
std::string EncodeUtf8(uint32_t cp);

// Strict UTF-8 (RFC 3629: no overlongs, no surrogates, max U+10FFFF).
//
// Returns the length of the longest prefix of `bytes` that does not end
// inside a character that could still be completed by more bytes. Invalid
// sequences inside that prefix are left for SanitizeUtf8 to replace.
size_t Utf8CompletePrefix(std::string_view bytes);
// Returns `bytes` with every maximal invalid subsequence replaced by U+FFFD
// (the "maximal subpart" practice of Unicode chapter 3), including an
// incomplete sequence at the end.
std::string SanitizeUtf8(std::string_view bytes);

namespace unicode_internal {
struct CodepointRange {
  uint32_t first;  // first code point of the run
  uint16_t flags;
};
extern const CodepointRange kCodepointRanges[];
extern const size_t kNumCodepointRanges;
extern const char kUnicodeVersion[];
}  // namespace unicode_internal

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_UNICODE_H_
