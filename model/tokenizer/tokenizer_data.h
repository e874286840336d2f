// The raw vocabulary a tokenizer is built from, as read from GGUF metadata
// (tokenizer.ggml.*) or from an HF tokenizer.json. Plain data, so loaders and
// the tokenizer do not depend on each other.
#ifndef BEACON_MODEL_TOKENIZER_TOKENIZER_DATA_H_
#define BEACON_MODEL_TOKENIZER_TOKENIZER_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace beacon {

// Token types as GGUF stores them (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special: <|im_start|>, <|endoftext|>, ...
  kUserDefined = 4,  // added tokens matched verbatim before BPE
  kUnused = 5,
  kByte = 6,
};

struct TokenizerData {
  std::string model = "gpt2";          // tokenizer.ggml.model; only byte-level BPE ("gpt2")
  std::string pre = "default";         // tokenizer.ggml.pre: pre-tokenizer split ("smollm", "llama3", "qwen2", ...)
  std::vector<std::string> tokens;     // id -> token text in byte-level (GPT-2 unicode) form
  std::vector<TokenType> token_types;  // same length as tokens (kNormal when absent)
  std::vector<std::string> merges;     // "left right", rank = index
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> extra_eos_ids;  // e.g. <|im_end|>, <|eot_id|>: also end generation
  bool add_bos = false;                // prepend BOS when encoding a prompt
  std::string chat_template;           // Jinja source from the model, may be empty
};

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_TOKENIZER_DATA_H_
