// A tokenizer taken from another file than the weights (--tokenizer), and a
// chat template from a file of its own (--chat-template), as vLLM's flags of
// the same names take them:
//   path/to/file.gguf   any GGUF: a whole model, or a vocab-only file (the
//                       metadata and no tensors, as llama.cpp ships them);
//                       only its tokenizer.* keys are read
//   path/to/hf_dir/     tokenizer.json (+ tokenizer_config.json), with
//                       chat_template.jinja beside them taking precedence
//                       over tokenizer_config.json's chat_template, as
//                       transformers does
// With dummy: weights this runs a real model's tokenizer and template at a
// small shape.
#ifndef BEACON_MODEL_TOKENIZER_LOADER_H_
#define BEACON_MODEL_TOKENIZER_LOADER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer_data.h"

namespace beacon {

// NOT_FOUND naming the path when it does not exist or (for a GGUF) carries
// no tokenizer; INVALID_ARGUMENT naming the path for a file of another kind
// or a malformed vocabulary; a GGUF cut short is GgufFile::Open's DATA_LOSS.
absl::StatusOr<TokenizerData> LoadTokenizerData(std::string_view path);

// A Jinja chat template file, whole. NOT_FOUND naming the path when it
// cannot be opened; INVALID_ARGUMENT when it is a directory, empty, larger
// than 1 MiB, holds a NUL byte or is not valid UTF-8 (a binary given by
// mistake). Parsing is the tokenizer's.
absl::StatusOr<std::string> ReadChatTemplateFile(std::string_view path);

// An HF directory's chat_template.jinja, when it has one, replaces
// data->chat_template (transformers >= 4.43 keeps the template there, and it
// wins over tokenizer_config.json's). Errors as ReadChatTemplateFile.
absl::Status UseChatTemplateJinja(const std::string& dir, TokenizerData* data);

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_LOADER_H_
