// The GGUF model loader, in the pieces LoadGgufModel (model_loader.h) is made
// of, exposed for tests, the fuzzer and the tokenizer.
//
// Key names follow llama.cpp's conventions: `general.architecture` selects the
// family ("llama", "qwen2", "qwen3") and the hyper-parameters live under
// "<arch>." (block_count, embedding_length, attention.head_count, ...).
// Tensor names: token_embd / output_norm / output (absent: tied to
// token_embd) and blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
// ffn_norm, ffn_gate, ffn_up, ffn_down}.weight; qwen2 adds
// blk.N.attn_{q,k,v}.bias, qwen3 blk.N.attn_{q,k}_norm.weight.
#ifndef BEACON_MODEL_GGUF_LOADER_H_
#define BEACON_MODEL_GGUF_LOADER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_loader.h"
#include "model/tokenizer/tokenizer_data.h"

namespace beacon {

// The hyper-parameters, validated (ModelConfig::Validate). vocab_size comes
// from `<arch>.vocab_size`, else the length of tokenizer.ggml.tokens, else
// token_embd's row count. Rejects features the forward pass does not
// implement (partial rotary, RoPE scaling types other than those of
// model/rope_config.h, key/value head sizes that differ) rather than
// computing something else. INVALID_ARGUMENT naming the key.
absl::StatusOr<ModelConfig> ReadGgufModelConfig(const GgufFile& file);

// The tokenizer.ggml.* vocabulary and tokenizer.chat_template. NOT_FOUND when
// the file carries no tokenizer.ggml.tokens. Special ids must index the
// vocabulary: an out-of-range BOS/EOS is INVALID_ARGUMENT, an out-of-range
// UNK/PAD becomes -1 (as llama.cpp does). extra_eos_ids lists <|im_end|>,
// <|eot_id|> and <|endoftext|> when present and not the EOS itself.
absl::StatusOr<TokenizerData> ReadGgufTokenizer(const GgufFile& file);

// Builds the model from a parsed file. Matrices point into the file's bytes
// (zero-copy) in their stored type; vectors are converted to F32 into owned
// buffers when stored otherwise. A tensor whose data is not 32-byte aligned in
// memory (a file with general.alignment < 32, or an unaligned FromBuffer
// buffer) is copied into an aligned buffer, so every Tensor::data is 32-byte
// aligned. `file` goes into weights.keep_alive, with the buffers; for a
// FromBuffer file the caller must also keep its buffer alive.
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadGgufModelFromFile(std::shared_ptr<const GgufFile> file);

}  // namespace beacon

#endif  // BEACON_MODEL_GGUF_LOADER_H_
