#include "model/hf_tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "model/hf_config.h"
#include "util/utf8.h"

namespace beacon {
namespace {

using json = nlohmann::json;

// Ids above this are refused: they would make `tokens` allocate without bound.
constexpr uint64_t kMaxTokenId = 1u << 24;
constexpr uint64_t kMaxIdGap = 4096;  // ids past the entries' count a vocabulary may leave unused

const json* Child(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

absl::string_view StringOr(const json* j, absl::string_view fallback) {
  return j != nullptr && j->is_string() ? absl::string_view(j->get_ref<const std::string&>()) : fallback;
}

// What the pre-tokenizer tree holds that decides TokenizerData::pre.
struct PreTokenizerFacts {
  std::vector<std::string> split_patterns;  // with CR/LF written as \r, \n
  bool byte_level = false;                  // a ByteLevel step anywhere
  bool byte_level_regex = false;            // ... that also splits with the GPT-2 regex
  bool individual_digits = false;
};

void CollectPreTokenizer(const json& node, PreTokenizerFacts* facts) {
  const absl::string_view type = StringOr(Child(node, "type"), "");
  if (type == "Sequence") {
    const json* list = Child(node, "pretokenizers");
    if (list != nullptr && list->is_array()) {
      for (const json& child : *list) CollectPreTokenizer(child, facts);
    }
  } else if (type == "ByteLevel") {
    facts->byte_level = true;
    const json* use_regex = Child(node, "use_regex");  // HF's default is true
    if (use_regex == nullptr || !use_regex->is_boolean() || use_regex->get<bool>()) {
      facts->byte_level_regex = true;
    }
  } else if (type == "Digits") {
    const json* ind = Child(node, "individual_digits");
    facts->individual_digits = ind != nullptr && ind->is_boolean() && ind->get<bool>();
  } else if (type == "Split") {
    const json* pattern = Child(node, "pattern");
    const json* regex = pattern != nullptr ? Child(*pattern, "Regex") : nullptr;
    if (regex == nullptr && pattern != nullptr) regex = Child(*pattern, "String");
    if (regex != nullptr && regex->is_string()) {
      // Files differ in whether CR/LF are JSON-escaped control characters or
      // regex escapes; compare in the regex-escape spelling.
      facts->split_patterns.push_back(absl::StrReplaceAll(regex->get<std::string>(), {{"\r", "\\r"}, {"\n", "\\n"}}));
    }
  }
}

// Recognises the splits the tokenizer module implements; anything else would
// tokenise differently from the model's training, so it is refused.
absl::StatusOr<std::string> PreName(const PreTokenizerFacts& f, const std::string& path) {
  auto any = [&](absl::string_view needle) {
    for (const auto& p : f.split_patterns) {
      if (absl::StrContains(p, needle)) return true;
    }
    return false;
  };
  // Both Llama 3 and Qwen2 regexes take letters this way; they differ in
  // digit runs (up to three digits vs one).
  const bool llama3_letters = any("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+");
  if (llama3_letters && any("\\p{N}{1,3}")) return std::string("llama3");
  if (llama3_letters && any("\\p{N}")) return std::string("qwen2");
  if (!f.split_patterns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unsupported pre_tokenizer Split regex '", f.split_patterns.front(), "'"));
  }
  if (f.byte_level_regex) return std::string(f.individual_digits ? "smollm" : "gpt2");
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": pre_tokenizer neither splits with a known regex nor uses ByteLevel's"));
}

// A token named in tokenizer_config.json: "text", {"content": "text"} or null.
absl::StatusOr<int32_t> ResolveToken(const json& cfg, const char* key, const std::string& source,
                                     const absl::flat_hash_map<std::string_view, int32_t>& ids) {
  const json* v = Child(cfg, key);
  if (v == nullptr) return -1;
  if (v->is_object()) v = Child(*v, "content");
  if (v == nullptr || !v->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": '", key, "' must be a string or {\"content\": string}"));
  }
  const auto it = ids.find(v->get_ref<const std::string&>());
  if (it == ids.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", key, " '", v->get<std::string>(), "' is not in the vocabulary"));
  }
  return it->second;
}

// The special token a TemplateProcessing post-processor puts first in a single
// sequence ("<|begin_of_text|>" for Llama 3), or empty.
std::string LeadingTemplateToken(const json& pp) {
  const absl::string_view type = StringOr(Child(pp, "type"), "");
  if (type == "Sequence") {
    const json* list = Child(pp, "processors");
    if (list != nullptr && list->is_array()) {
      for (const json& child : *list) {
        if (std::string t = LeadingTemplateToken(child); !t.empty()) return t;
      }
    }
    return "";
  }
  if (type != "TemplateProcessing") return "";
  const json* single = Child(pp, "single");
  if (single == nullptr || !single->is_array() || single->empty()) return "";
  const json* special = Child((*single)[0], "SpecialToken");
  return special != nullptr ? std::string(StringOr(Child(*special, "id"), "")) : "";
}

absl::Status ReadTokenizerConfig(const std::string& path, const json& tokenizer, TokenizerData* out) {
  absl::flat_hash_map<std::string_view, int32_t> ids;
  ids.reserve(out->tokens.size());
  for (size_t i = 0; i < out->tokens.size(); ++i) ids.emplace(out->tokens[i], static_cast<int32_t>(i));

  json cfg = json::object();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    auto parsed = ReadJsonFile(path);
    if (!parsed.ok()) return parsed.status();
    if (!parsed->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
    cfg = *std::move(parsed);
  }
  const std::pair<const char*, int32_t*> named[] = {{"bos_token", &out->bos_id},
                                                    {"eos_token", &out->eos_id},
                                                    {"unk_token", &out->unk_id},
                                                    {"pad_token", &out->pad_id}};
  for (const auto& [key, dst] : named) {
    auto id = ResolveToken(cfg, key, path, ids);
    if (!id.ok()) return id.status();
    *dst = *id;
  }
  if (out->unk_id < 0) {  // BPE models may name theirs in tokenizer.json
    const json* model = Child(tokenizer, "model");
    const json* unk = model != nullptr ? Child(*model, "unk_token") : nullptr;
    if (unk != nullptr && unk->is_string()) {
      const auto it = ids.find(unk->get_ref<const std::string&>());
      if (it != ids.end()) out->unk_id = it->second;
    }
  }

  const json* post = Child(tokenizer, "post_processor");
  const std::string lead = post != nullptr ? LeadingTemplateToken(*post) : "";
  if (const json* add = Child(cfg, "add_bos_token")) {
    if (!add->is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": 'add_bos_token' must be a boolean"));
    }
    out->add_bos = add->get<bool>();
  } else if (!lead.empty()) {
    const auto it = ids.find(lead);
    if (it != ids.end()) {
      out->add_bos = true;
      if (out->bos_id < 0) out->bos_id = it->second;
    }
  }

  if (const json* tmpl = Child(cfg, "chat_template")) {
    if (tmpl->is_string()) {
      out->chat_template = tmpl->get<std::string>();
    } else if (tmpl->is_array()) {  // [{"name": ..., "template": ...}]
      for (const json& t : *tmpl) {
        const absl::string_view text = StringOr(Child(t, "template"), "");
        if (out->chat_template.empty() || StringOr(Child(t, "name"), "") == "default") {
          out->chat_template = std::string(text);
        }
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ": 'chat_template' must be a string or a list"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerData> ReadHfTokenizerJson(const std::string& path) {
  auto parsed = ReadJsonFile(path);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  auto bad = [&](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...)); };
  const json* model = Child(j, "model");
  if (model == nullptr || !model->is_object()) return bad("'model' missing or not an object");
  const absl::string_view type = StringOr(Child(*model, "type"), "");
  if (type != "BPE") return bad("model.type is '", type, "'; only byte-level BPE is supported");
  if (const json* bf = Child(*model, "byte_fallback"); bf != nullptr && bf->is_boolean() && bf->get<bool>()) {
    return bad("model.byte_fallback is set (SentencePiece-style BPE); only byte-level BPE is supported");
  }
  PreTokenizerFacts facts;
  if (const json* pre = Child(j, "pre_tokenizer")) CollectPreTokenizer(*pre, &facts);
  const json* decoder = Child(j, "decoder");
  const bool byte_level_decoder = StringOr(decoder != nullptr ? Child(*decoder, "type") : nullptr, "") == "ByteLevel";
  if (!facts.byte_level && !byte_level_decoder) {
    return bad("neither pre_tokenizer nor decoder is ByteLevel; only byte-level BPE is supported");
  }

  TokenizerData out;
  out.model = "gpt2";
  auto pre = PreName(facts, path);
  if (!pre.ok()) return pre.status();
  out.pre = *std::move(pre);

  // id -> (text, type); filled from vocab, then overridden by added_tokens.
  // Ids are dense in real vocabularies; one far past the entries would grow
  // by_id (and the vocabulary, with <unused_i> fillers) out of proportion to
  // the file (an id near 2^24 made ~800 MB: issue 46), so an id must stay
  // within the entries' count plus kMaxIdGap.
  std::vector<std::optional<std::pair<std::string, TokenType>>> by_id;
  const json* vocab = Child(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return bad("model.vocab missing or not an object");
  const json* added = Child(j, "added_tokens");
  const uint64_t id_bound = std::min<uint64_t>(
      kMaxTokenId, vocab->size() + (added != nullptr && added->is_array() ? added->size() : 0) + kMaxIdGap);
  auto place = [&](uint64_t id, std::string text, TokenType tt) {
    if (id >= by_id.size()) by_id.resize(id + 1);
    by_id[id] = std::pair{std::move(text), tt};
  };
  for (const auto& [text, id] : vocab->items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= id_bound) {
      return bad("model.vocab entry '", text, "' has an invalid id ", id.dump(), " (ids are 0 to ", id_bound - 1,
                 ": the entries' count and a gap of ", kMaxIdGap, ")");
    }
    const uint64_t i = id.get<uint64_t>();
    if (i < by_id.size() && by_id[i].has_value()) {
      return bad("model.vocab gives id ", i, " to both '", by_id[i]->first, "' and '", text, "'");
    }
    place(i, text, TokenType::kNormal);
  }
  if (added != nullptr) {
    if (!added->is_array()) return bad("'added_tokens' must be a list");
    for (const json& a : *added) {
      const json* id = Child(a, "id");
      const json* content = Child(a, "content");
      const json* special = Child(a, "special");
      if (id == nullptr || !id->is_number_unsigned() || id->get<uint64_t>() >= id_bound || content == nullptr ||
          !content->is_string()) {
        return bad("added_tokens entry ", Excerpt(a.dump(), 200), " needs an 'id' below ", id_bound,
                   " and a string 'content'");
      }
      const bool is_special = special != nullptr && special->is_boolean() && special->get<bool>();
      place(id->get<uint64_t>(), content->get<std::string>(),
            is_special ? TokenType::kControl : TokenType::kUserDefined);
    }
  }
  out.tokens.reserve(by_id.size());
  out.token_types.reserve(by_id.size());
  for (size_t i = 0; i < by_id.size(); ++i) {
    if (by_id[i].has_value()) {
      out.tokens.push_back(std::move(by_id[i]->first));
      out.token_types.push_back(by_id[i]->second);
    } else {
      out.tokens.push_back(absl::StrCat("<unused_", i, ">"));
      out.token_types.push_back(TokenType::kUnused);
    }
  }

  if (const json* merges = Child(*model, "merges")) {
    if (!merges->is_array()) return bad("model.merges must be a list");
    out.merges.reserve(merges->size());
    for (const json& m : *merges) {
      if (m.is_string()) {
        out.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        out.merges.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
      } else {
        return bad("model.merges entry ", out.merges.size(), " is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }

  const std::string config_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  if (absl::Status s = ReadTokenizerConfig(config_path, j, &out); !s.ok()) return s;
  return out;
}

}  // namespace beacon
