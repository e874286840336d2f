#include "server/openai/openai_logprobs.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"

namespace beacon {
namespace {

using nlohmann::json;

// A token's text, rendered for special tokens too (a logprob names the
// token whatever the output hides).
std::string Bytes(const Tokenizer& tokenizer, int32_t id) { return tokenizer.TokenBytes(id, /*render_special=*/true); }

json ByteList(const std::string& bytes) {
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
  return b;
}

// The "token" a client sees: the text, or "token_id:<id>".
std::string Shown(const Tokenizer& tokenizer, int32_t id, bool as_ids) {
  return as_ids ? absl::StrCat("token_id:", id) : SanitizeUtf8(Bytes(tokenizer, id));
}

json ChatEntry(const Tokenizer& tokenizer, int32_t id, float logprob, bool as_ids) {
  const std::string bytes = as_ids ? Shown(tokenizer, id, true) : Bytes(tokenizer, id);
  return {{"token", Shown(tokenizer, id, as_ids)}, {"logprob", JsonLogprob(logprob)}, {"bytes", ByteList(bytes)}};
}

}  // namespace

double JsonLogprob(float logprob) { return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0; }

json ChatLogprobs(std::span<const PositionLogprobs> positions, const Tokenizer& tokenizer, bool as_ids) {
  json content = json::array();
  for (const PositionLogprobs& p : positions) {
    json entry = ChatEntry(tokenizer, p.id, p.logprob, as_ids);
    json top = json::array();
    for (const TokenLogprob& t : p.top) top.push_back(ChatEntry(tokenizer, t.id, t.logprob, as_ids));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return content;
}

void CompletionLogprobs::Push(int32_t id, const PositionLogprobs* lp) {
  const std::string text = Shown(*tokenizer_, id, as_ids_);
  tokens_.push_back(text);
  offsets_.push_back(offset_);
  // Offsets count characters (code points), as Python's str indices do.
  for (unsigned char c : text) offset_ += (c & 0xC0) != 0x80;
  if (lp == nullptr) {
    token_logprobs_.push_back(nullptr);
    top_.push_back(nullptr);
    return;
  }
  token_logprobs_.push_back(JsonLogprob(lp->logprob));
  // OpenAI's shape is a {token text: logprob} object holding the n most
  // likely tokens and the sampled one (so up to n + 1 entries, as OpenAI's
  // legacy API and vLLM do); two ids with the same text keep the more
  // likely one (the first, in this order).
  json top = json::object();
  for (const TokenLogprob& t : lp->top) {
    const std::string key = Shown(*tokenizer_, t.id, as_ids_);
    if (!top.contains(key)) top[key] = JsonLogprob(t.logprob);
  }
  if (!top.contains(text)) top[text] = JsonLogprob(lp->logprob);
  top_.push_back(std::move(top));
}

void CompletionLogprobs::AddPrompt(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs) {
  for (size_t i = 0; i < prompt.size(); ++i)
    Push(prompt[i], i == 0 || i > logprobs.size() ? nullptr : &logprobs[i - 1]);
}

void CompletionLogprobs::Add(std::span<const PositionLogprobs> positions) {
  for (const PositionLogprobs& p : positions) Push(p.id, &p);
}

json CompletionLogprobs::Take() {
  json out = {{"tokens", std::move(tokens_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"top_logprobs", std::move(top_)},
              {"text_offset", std::move(offsets_)}};
  tokens_ = json::array();
  token_logprobs_ = json::array();
  top_ = json::array();
  offsets_ = json::array();
  return out;
}

json PromptLogprobsJson(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs,
                        const Tokenizer& tokenizer) {
  json out = json::array();
  if (!prompt.empty()) out.push_back(nullptr);
  for (const PositionLogprobs& p : logprobs) {
    json entry = json::object();
    auto add = [&](int32_t id, float logprob, int32_t rank) {
      const std::string key = absl::StrCat(id);
      if (entry.contains(key)) return;
      entry[key] = {
          {"logprob", JsonLogprob(logprob)}, {"rank", rank}, {"decoded_token", SanitizeUtf8(Bytes(tokenizer, id))}};
    };
    add(p.id, p.logprob, p.rank);
    // The top list is ordered: every token more likely than entry r is before it.
    for (size_t r = 0; r < p.top.size(); ++r) {
      int32_t above = 0;
      for (size_t q = 0; q < r; ++q) above += p.top[q].logprob > p.top[r].logprob;
      add(p.top[r].id, p.top[r].logprob, above + 1);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace beacon
