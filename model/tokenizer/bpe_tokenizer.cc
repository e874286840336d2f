// Tokenizer::Create and the byte-level BPE tokenizer behind it.
//
// Encode = special-token split (special_tokens.h) -> pre-tokenizer split of
// each text fragment (pretokenizer.h) -> BPE merges per word (bpe_model.h);
// each stage reproduces llama.cpp, so the ids equal llama_tokenize's for the
// same GGUF (add_special = add_bos, parse_special as given).
//
// Token kinds, as llama.cpp treats them for byte-level vocabularies:
//   normal        bytes = byte-level decoding of the text
//   control, unknown   "special": their text only with render_special;
//                 matched in input only with parse_special
//   user-defined  added tokens: text always, always matched in input
//   byte (<0xXX>) that byte
//   unused, undefined  render as nothing
// Tokens named like end-of-turn markers (<|im_end|>, <|eot_id|>, ...) are
// treated as control and as end of generation, as llama.cpp does, whatever
// type the file gave them.

#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/bpe_model.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/pretokenizer.h"
#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {
namespace {

// Texts llama.cpp recognises as end of generation (llama-vocab.cpp).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",   "<|endoftext|>",
    "<|eom_id|>", "<EOT>",      "_<EOT>",  "<|end_of_text|>", "<｜end▁of▁sentence｜>",
};

enum class Render : uint8_t { kBytes, kSpecialText, kAlwaysText, kNothing };

bool IsEndOfGenerationText(std::string_view text) {
  for (std::string_view t : kEndOfGenerationTexts) {
    if (text == t) return true;
  }
  return false;
}

// "<0x0A>" -> 0x0A; -1 when `text` is not of that form.
int ParseByteToken(std::string_view text) {
  int value = 0;
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text.back() != '>' ||
      !absl::SimpleHexAtoi(absl::string_view(text.data() + 3, 2), &value)) {
    return -1;
  }
  return value;
}

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(TokenizerData data, PreTokenizerInfo pre, BpeModel model)
      : data_(std::move(data)), pre_(pre), pretokenizer_(pre.kind), model_(std::move(model)) {}

  // INVALID_ARGUMENT when the chat template does not parse.
  absl::Status Init();

  std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_bos) const override;
  std::string TokenBytes(int32_t id, bool render_special) const override;
  std::string Decode(const std::vector<int32_t>& ids, bool render_special) const override;
  absl::StatusOr<std::string> ApplyChatTemplate(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                const jinja::Json& extra_vars) const override;
  std::string_view chat_template_source() const override { return data_.chat_template; }

  int32_t vocab_size() const override { return static_cast<int32_t>(data_.tokens.size()); }
  int32_t bos_id() const override { return data_.bos_id; }
  int32_t eos_id() const override { return data_.eos_id; }
  bool IsEndOfGeneration(int32_t id) const override { return end_of_generation_.contains(id); }
  // Control and unknown-type tokens: what render_special governs.
  bool IsSpecial(int32_t id) const override {
    return id >= 0 && id < vocab_size() && render_[id] == Render::kSpecialText;
  }
  int32_t TokenId(std::string_view token_text) const override { return model_.Find(token_text); }

 private:
  TokenizerData data_;
  PreTokenizerInfo pre_;
  PreTokenizer pretokenizer_;
  BpeModel model_;
  SpecialTokenSplitter special_;
  std::vector<Render> render_;      // per id
  std::vector<std::string> bytes_;  // per id: what it renders as (see render_)
  absl::flat_hash_set<int32_t> end_of_generation_;
  std::optional<ChatTemplate> chat_template_;  // set by Init
};

absl::Status CheckId(const char* field, int32_t id, size_t vocab_size) {
  if (id < -1 || id >= static_cast<int64_t>(vocab_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", field, " = ", id, " is outside the vocabulary of ", vocab_size, " tokens"));
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::Init() {
  const size_t n = data_.tokens.size();
  if (data_.token_types.empty()) data_.token_types.assign(n, TokenType::kNormal);
  std::vector<SpecialTokenSplitter::Candidate> candidates;
  render_.resize(n);
  bytes_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = data_.tokens[id];
    TokenType type = data_.token_types[id];
    if (IsEndOfGenerationText(text)) {
      type = TokenType::kControl;
      end_of_generation_.insert(static_cast<int32_t>(id));
    }
    switch (type) {
      case TokenType::kNormal:
        render_[id] = Render::kBytes;
        bytes_[id] = DecodeByteLevel(text);
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
        render_[id] = Render::kSpecialText;
        bytes_[id] = text;
        candidates.push_back({static_cast<int32_t>(id), text, /*control=*/true});
        break;
      case TokenType::kUserDefined:
        render_[id] = Render::kAlwaysText;
        bytes_[id] = text;
        candidates.push_back({static_cast<int32_t>(id), text, /*control=*/false});
        break;
      case TokenType::kByte: {
        const int b = ParseByteToken(text);
        render_[id] = b >= 0 ? Render::kBytes : Render::kNothing;
        if (b >= 0) bytes_[id] = std::string(1, static_cast<char>(b));
        break;
      }
      default: render_[id] = Render::kNothing; break;
    }
  }
  special_ = SpecialTokenSplitter(std::move(candidates));
  data_.merges = {};  // now held by model_ as id pairs
  if (data_.eos_id >= 0) end_of_generation_.insert(data_.eos_id);
  for (int32_t id : data_.extra_eos_ids) end_of_generation_.insert(id);
  // A template's BOS marker is rendered only when the vocabulary does not
  // prepend BOS itself, so Encode(rendered, parse_special=true, add_bos=true)
  // yields exactly one BOS either way.
  const bool render_bos = !data_.add_bos && data_.bos_id >= 0;
  absl::StatusOr<ChatTemplate> t =
      ChatTemplate::FromSource(data_.chat_template, render_bos ? data_.tokens[data_.bos_id] : std::string(),
                               data_.eos_id >= 0 ? data_.tokens[data_.eos_id] : std::string());
  if (!t.ok()) return t.status();
  chat_template_ = *std::move(t);
  return absl::OkStatus();
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool parse_special, bool add_bos) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && data_.add_bos && data_.bos_id >= 0) ids.push_back(data_.bos_id);
  BpeModel::Scratch scratch;
  std::vector<std::string> words;
  for (const auto& fragment : special_.Split(text, parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      continue;
    }
    words.clear();
    pretokenizer_.Split(text.substr(fragment.begin, fragment.length), &words);
    for (const std::string& word : words) model_.EncodeWord(word, pre_.ignore_merges, &scratch, &ids);
  }
  return ids;
}

std::string BpeTokenizer::TokenBytes(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_size()) return std::string();
  switch (render_[id]) {
    case Render::kBytes:
    case Render::kAlwaysText: return bytes_[id];
    case Render::kSpecialText: return render_special ? bytes_[id] : std::string();
    case Render::kNothing: break;
  }
  return std::string();
}

std::string BpeTokenizer::Decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id, render_special);
  return out;
}

absl::StatusOr<std::string> BpeTokenizer::ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                                            bool add_generation_prompt,
                                                            const jinja::Json& extra_vars) const {
  return chat_template_->Render(messages, add_generation_prompt, extra_vars);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerData data) {
  if (data.model != "gpt2") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported tokenizer model '", data.model,
                                                   "' (tokenizer.ggml.model); only byte-level BPE "
                                                   "'gpt2' is supported"));
  }
  absl::StatusOr<PreTokenizerInfo> pre = LookupPreTokenizer(data.pre);
  if (!pre.ok()) return pre.status();
  const size_t n = data.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer: the vocabulary (tokenizer.ggml.tokens) is empty");
  if (!data.token_types.empty() && data.token_types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", data.token_types.size(), " token types for ", n, " tokens"));
  }
  for (auto [field, id] : {std::pair<const char*, int32_t>{"bos_id", data.bos_id},
                           {"eos_id", data.eos_id},
                           {"unk_id", data.unk_id},
                           {"pad_id", data.pad_id}}) {
    if (absl::Status s = CheckId(field, id, n); !s.ok()) return s;
  }
  for (int32_t id : data.extra_eos_ids) {
    if (id < 0 || id >= static_cast<int64_t>(n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: extra_eos_ids has ", id, ", outside the vocabulary of ", n, " tokens"));
    }
  }
  if (data.add_bos && data.bos_id < 0) {
    return absl::InvalidArgumentError("tokenizer: add_bos is set but there is no bos_id");
  }
  absl::StatusOr<BpeModel> model = BpeModel::Build(data.tokens, data.merges);
  if (!model.ok()) return model.status();
  auto tokenizer = std::make_unique<BpeTokenizer>(std::move(data), *pre, *std::move(model));
  if (absl::Status s = tokenizer->Init(); !s.ok()) return s;
  return tokenizer;
}

}  // namespace beacon
