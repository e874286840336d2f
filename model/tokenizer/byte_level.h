// The GPT-2 byte-level alphabet: every byte 0..255 is written as one
// printable code point so that byte-level BPE vocabularies (GPT-2, SmolLM2,
// Llama 3, Qwen) can store arbitrary bytes as text. Printable Latin-1 bytes
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other
// 68 bytes map, in byte order, to U+0100, U+0101, ... (so ' ' is "Ġ" U+0120
// and '\n' is "Ċ" U+010A).
#ifndef BEACON_MODEL_TOKENIZER_BYTE_LEVEL_H_
#define BEACON_MODEL_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace beacon {

// The code point that stands for byte `b`.
uint32_t ByteToCodepoint(uint8_t b);
// The byte a code point stands for, or -1 if it is not in the alphabet.
int ByteFromCodepoint(uint32_t cp);

// Appends the byte-level text of raw `bytes` (each byte -> UTF-8 of its code
// point) to `out`.
void AppendByteLevel(std::string_view bytes, std::string* out);

// Undoes the mapping for a token's text. Code points outside the alphabet
// (found in vocabularies that mix in non-byte-level added tokens) are kept as
// their own UTF-8 rather than dropped.
std::string DecodeByteLevel(std::string_view token_text);

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_BYTE_LEVEL_H_
