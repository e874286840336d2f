// Pre-tokenizers: the regex splits that cut text into words before BPE,
// selected by the GGUF's tokenizer.ggml.pre name.
//
// Each split is a hand-written matcher (no std::regex) that reproduces what
// llama.cpp produces for the same name, including its quirks: several regexes
// applied in sequence, each one only within the pieces left by the previous
// one (so a look-ahead never sees past a piece), and text between matches kept
// as pieces of its own.
//
//   family      names (tokenizer.ggml.pre)                 splits, in order
//   kDefault    default                                    [\p{P}$+<=>^~|]+ ; GPT-2 ; \p{N}+ ; [0-9]{3}
//   kGpt2       gpt2, gpt-2, phi-2, mpt, olmo, jais        GPT-2
//   kStarCoder  smollm, starcoder, refact, command-r,      \p{N} ; GPT-2
//               codeshell, exaone, minerva-7b
//   kLlama3     llama3, llama-v3, llama-bpe, falcon3,      Llama 3 (\p{N}{1,3})
//               dbrx, smaug-bpe
//   kQwen2      qwen2, deepseek-r1-qwen, stablelm2, megrez Llama 3 with \p{N} (one digit)
//
// where GPT-2 is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// and Llama 3 is (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//                 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
#ifndef BEACON_MODEL_TOKENIZER_PRETOKENIZER_H_
#define BEACON_MODEL_TOKENIZER_PRETOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace beacon {

enum class PreTokenizerKind { kDefault, kGpt2, kStarCoder, kLlama3, kQwen2 };

struct PreTokenizerInfo {
  PreTokenizerKind kind;
  // llama.cpp's "ignore_merges" (Llama 3 family): a word that is itself a
  // vocabulary token is emitted as that token without running BPE.
  bool ignore_merges = false;
};

// INVALID_ARGUMENT naming `name` and listing the supported names when unknown.
absl::StatusOr<PreTokenizerInfo> LookupPreTokenizer(std::string_view name);
// All accepted names, comma separated (for error messages and docs).
std::string SupportedPreTokenizerNames();

// A piece of text as a half-open range of code point indices.
struct CodepointSpan {
  uint32_t begin;
  uint32_t end;
};

class PreTokenizer {
 public:
  explicit PreTokenizer(PreTokenizerKind kind) : kind_(kind) {}

  // Splits `text` into words, appended to `words` as UTF-8. Invalid UTF-8 in
  // `text` has become U+FFFD in the words (as in llama.cpp); the
  // concatenation of the words is otherwise `text`.
  void Split(std::string_view text, std::vector<std::string>* words) const;

  // The same split as code point spans over `cps` (exposed for tests).
  std::vector<CodepointSpan> SplitCodepoints(const std::vector<uint32_t>& cps) const;

  PreTokenizerKind kind() const { return kind_; }

 private:
  PreTokenizerKind kind_;
};

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_PRETOKENIZER_H_
