// ReadGgufTokenizer: the tokenizer.ggml.* metadata as TokenizerData.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/gguf_loader.h"

namespace beacon {
namespace {

constexpr int32_t kMaxTokenType = static_cast<int32_t>(TokenType::kByte);

// Reads an optional special-token id. Absent: -1. `required_in_range`: an id
// outside [0, n_tokens) is an error; otherwise it is dropped to -1.
absl::StatusOr<int32_t> ReadSpecialId(const GgufFile& file, const char* key, size_t n_tokens, bool required_in_range) {
  if (!file.Has(key)) return -1;
  absl::StatusOr<int64_t> id = file.GetInt(key);
  if (!id.ok()) return id.status();
  if (*id >= 0 && static_cast<uint64_t>(*id) < n_tokens) return static_cast<int32_t>(*id);
  if (!required_in_range) return -1;
  return absl::InvalidArgumentError(absl::StrCat(file.name(), ": metadata '", key, "' = ", *id,
                                                 " is outside the vocabulary of ", n_tokens, " tokens"));
}

// Optional string / bool / string array: `*out` keeps its default when absent.
absl::Status ReadOptional(const GgufFile& file, std::string_view key, std::string* out) {
  if (!file.Has(key)) return absl::OkStatus();
  absl::StatusOr<std::string> v = file.GetString(key);
  if (!v.ok()) return v.status();
  *out = std::move(*v);
  return absl::OkStatus();
}

absl::Status ReadOptional(const GgufFile& file, std::string_view key, bool* out) {
  if (!file.Has(key)) return absl::OkStatus();
  absl::StatusOr<bool> v = file.GetBool(key);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

absl::Status ReadOptional(const GgufFile& file, std::string_view key, std::vector<std::string>* out) {
  if (!file.Has(key)) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> v = file.GetStringArray(key);
  if (!v.ok()) return v.status();
  *out = std::move(*v);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerData> ReadGgufTokenizer(const GgufFile& file) {
  if (!file.Has("tokenizer.ggml.tokens")) {
    return absl::NotFoundError(
        absl::StrCat(file.name(), ": no tokenizer (metadata 'tokenizer.ggml.tokens' is absent)"));
  }
  TokenizerData data;
  // NOT_FOUND is reserved for "no tokenizer at all": a vocabulary without its
  // model type is a broken file.
  if (!file.Has("tokenizer.ggml.model")) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.name(), ": metadata 'tokenizer.ggml.model' is absent but tokenizer.ggml.tokens is present"));
  }
  absl::StatusOr<std::string> model = file.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status();
  data.model = std::move(*model);
  if (absl::Status st = ReadOptional(file, "tokenizer.ggml.pre", &data.pre); !st.ok()) return st;

  absl::StatusOr<std::vector<std::string>> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  if (tokens->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file.name(), ": metadata 'tokenizer.ggml.tokens' is empty"));
  }
  if (tokens->size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(file.name(), ": ", tokens->size(), " tokens do not fit int32 ids"));
  }
  data.tokens = std::move(*tokens);
  const size_t n = data.tokens.size();

  if (file.Has("tokenizer.ggml.token_type")) {
    absl::StatusOr<std::vector<int32_t>> types = file.GetI32Array("tokenizer.ggml.token_type");
    if (!types.ok()) return types.status();
    if (types->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(file.name(), ": metadata 'tokenizer.ggml.token_type' has ",
                                                     types->size(), " entries for ", n, " tokens"));
    }
    data.token_types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int32_t t = (*types)[i];
      if (t < 0 || t > kMaxTokenType) {
        return absl::InvalidArgumentError(absl::StrCat(file.name(), ": metadata 'tokenizer.ggml.token_type'[", i,
                                                       "] = ", t, " is not a token type (0..", kMaxTokenType, ")"));
      }
      data.token_types.push_back(static_cast<TokenType>(t));
    }
  } else {
    data.token_types.assign(n, TokenType::kNormal);
  }
  if (absl::Status st = ReadOptional(file, "tokenizer.ggml.merges", &data.merges); !st.ok()) {
    return st;
  }

  struct IdField {
    const char* key;
    int32_t* out;
    bool required_in_range;
  };
  for (const IdField& f : {IdField{"tokenizer.ggml.bos_token_id", &data.bos_id, true},
                           IdField{"tokenizer.ggml.eos_token_id", &data.eos_id, true},
                           IdField{"tokenizer.ggml.unknown_token_id", &data.unk_id, false},
                           IdField{"tokenizer.ggml.padding_token_id", &data.pad_id, false}}) {
    absl::StatusOr<int32_t> id = ReadSpecialId(file, f.key, n, f.required_in_range);
    if (!id.ok()) return id.status();
    *f.out = *id;
  }
  if (absl::Status st = ReadOptional(file, "tokenizer.ggml.add_bos_token", &data.add_bos); !st.ok()) {
    return st;
  }
  if (absl::Status st = ReadOptional(file, "tokenizer.chat_template", &data.chat_template); !st.ok()) {
    return st;
  }

  // End-of-turn markers of the chat formats we serve (ChatML, Llama 3) and the
  // document end: generation stops at any of them, not only at the EOS id.
  for (std::string_view marker : {"<|im_end|>", "<|eot_id|>", "<|endoftext|>"}) {
    for (size_t i = 0; i < n; ++i) {
      if (data.tokens[i] == marker) {
        if (static_cast<int32_t>(i) != data.eos_id) {
          data.extra_eos_ids.push_back(static_cast<int32_t>(i));
        }
        break;
      }
    }
  }
  return data;
}

}  // namespace beacon
