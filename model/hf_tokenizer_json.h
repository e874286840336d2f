// HF tokenizer.json (+ tokenizer_config.json beside it) -> TokenizerData.
//
// Only byte-level BPE tokenizers (GPT-2 style, as Llama 3, Qwen2/3, SmolLM2
// and DeepSeek-R1 distills use) are accepted: model.type must be "BPE" and
// the model must not use byte_fallback (SentencePiece-style BPE).
//
// Mapping:
//   model.vocab {text: id}          tokens[id] = text (kNormal)
//   model.merges                    "a b" strings or ["a", "b"] pairs -> "a b"
//   added_tokens [{id, content, special}]
//                                   tokens[id] = content; kControl when special,
//                                   kUserDefined otherwise
//   ids no entry names              "<unused_ID>", kUnused
//   pre_tokenizer                   TokenizerData::pre, llama.cpp's names:
//     Split regex with [^\r\n\p{L}\p{N}]?\p{L}+ and \p{N}{1,3} -> "llama3"
//     Split regex with [^\r\n\p{L}\p{N}]?\p{L}+ and \p{N}      -> "qwen2"
//       (Qwen2/3 and DeepSeek-R1-Distill-Qwen, which llama.cpp calls
//        "deepseek-r1-qwen" and splits as qwen2)
//     Digits(individual_digits) + ByteLevel(use_regex)      -> "smollm"
//     ByteLevel(use_regex) alone                            -> "gpt2" (GPT-2 regex;
//       not "default", which llama.cpp splits differently)
//     any other Split regex, or no regex at all            -> INVALID_ARGUMENT
// tokenizer_config.json (optional): bos_token, eos_token, unk_token, pad_token
// (a string or {"content": ...}) resolved to ids; add_bos_token; chat_template
// (a string, or a list of {name, template} from which "default" or the first
// is taken). Without add_bos_token, add_bos is true when the post_processor's
// TemplateProcessing starts a single sequence with the BOS token (Llama 3).
#ifndef BEACON_MODEL_HF_TOKENIZER_JSON_H_
#define BEACON_MODEL_HF_TOKENIZER_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer_data.h"

namespace beacon {

// Errors: NOT_FOUND when `path` cannot be opened; INVALID_ARGUMENT naming the
// file and field for anything malformed or unsupported.
absl::StatusOr<TokenizerData> ReadHfTokenizerJson(const std::string& path);

}  // namespace beacon

#endif  // BEACON_MODEL_HF_TOKENIZER_JSON_H_
