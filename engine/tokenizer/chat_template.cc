#include "engine/tokenizer/chat_template.h"

#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace beacon {
namespace {

constexpr absl::string_view kImStart = "<|im_start|>";
constexpr absl::string_view kImEnd = "<|im_end|>";
constexpr absl::string_view kStartHeader = "<|start_header_id|>";
constexpr absl::string_view kEndHeader = "<|end_header_id|>";
constexpr absl::string_view kEotId = "<|eot_id|>";
constexpr absl::string_view kKnowledgeDate = "Cutting Knowledge Date: ";

// Resolves the escapes of a Jinja string literal (\n \t \r \\ \' \").
std::string UnescapeJinja(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      default: out.push_back(c); break;  // \\ \' \" and anything else
    }
  }
  return out;
}

// True when `s` (source text between two markers) is entirely inside one
// string literal: no unescaped quote, no expression or statement delimiter.
bool IsPlainLiteralText(absl::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
      continue;
    }
    if (s[i] == '\'' || s[i] == '"') return false;
  }
  return !absl::StrContains(s, "{{") && !absl::StrContains(s, "{%") && !absl::StrContains(s, "}}") &&
         !absl::StrContains(s, "%}");
}

// Skips a newline written either as the character or as the escape "\n".
bool ConsumeNewline(absl::string_view* s) { return absl::ConsumePrefix(s, "\n") || absl::ConsumePrefix(s, "\\n"); }

// The first "<|im_start|>system\n...<|im_end|>" whose middle is a literal.
std::optional<std::string> FindDefaultSystemPrompt(absl::string_view source) {
  const std::string marker = absl::StrCat(kImStart, "system");
  for (size_t pos = source.find(marker); pos != absl::string_view::npos; pos = source.find(marker, pos + 1)) {
    absl::string_view rest = source.substr(pos + marker.size());
    if (!ConsumeNewline(&rest)) continue;
    const size_t end = rest.find(kImEnd);
    if (end == absl::string_view::npos) continue;
    const absl::string_view text = rest.substr(0, end);
    if (IsPlainLiteralText(text)) return UnescapeJinja(text);
  }
  return std::nullopt;
}

// The literal after `key` up to a newline or quote (Llama 3.1 date lines).
std::optional<std::string> LiteralAfter(absl::string_view source, absl::string_view key) {
  const size_t pos = source.find(key);
  if (pos == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = source.substr(pos + key.size());
  size_t end = 0;
  while (end < rest.size() && rest[end] != '\n' && rest[end] != '\\' && rest[end] != '"' && rest[end] != '\'') {
    ++end;
  }
  return std::string(rest.substr(0, end));
}

std::string TodayDate() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%d %b %Y", &tm);
  return buf;
}

// Jinja's `trim` for the common case: ASCII white space at both ends.
absl::string_view Trim(absl::string_view s) {
  constexpr absl::string_view kWs = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kWs);
  if (b == absl::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kWs) - b + 1);
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source_view, std::string bos_text) {
  // absl::string_view: this abseil build does not alias std::string_view.
  const absl::string_view source(source_view.data(), source_view.size());
  ChatTemplate t;
  t.bos_text_ = std::move(bos_text);
  if (Trim(source).empty() || absl::StrContains(source, kImStart)) {
    t.family_ = Family::kChatMl;
    t.default_system_ = FindDefaultSystemPrompt(source);
    return t;
  }
  if (absl::StrContains(source, kStartHeader)) {
    t.family_ = Family::kLlama3;
    if (absl::StrContains(source, kKnowledgeDate)) {
      t.knowledge_date_ = LiteralAfter(source, kKnowledgeDate);
      if (absl::StrContains(source, "strftime_now")) {
        t.today_date_ = TodayDate();  // what HF and llama.cpp pass to strftime_now
      } else {
        t.today_date_ = LiteralAfter(source, "date_string = \"").value_or("26 Jul 2024");
      }
    }
    return t;
  }
  absl::string_view head = source.substr(0, 80);
  return absl::UnimplementedError(
      absl::StrCat("unsupported chat template (only ChatML, with <|im_start|>, and Llama 3, with "
                   "<|start_header_id|>, are supported; there is no Jinja engine): \"",
                   head, source.size() > head.size() ? "..." : "", "\""));
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role: '", role, "' is not one of system, user, assistant"));
    }
  }
  return family_ == Family::kChatMl ? RenderChatMl(messages, add_generation_prompt)
                                    : RenderLlama3(messages, add_generation_prompt);
}

std::string ChatTemplate::RenderChatMl(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (default_system_.has_value() && !messages.empty() && messages[0].role != "system") {
    absl::StrAppend(&out, kImStart, "system\n", *default_system_, kImEnd, "\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, kImStart, m.role, "\n", m.content, kImEnd, "\n");
  }
  if (add_generation_prompt) absl::StrAppend(&out, kImStart, "assistant\n");
  return out;
}

std::string ChatTemplate::RenderLlama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  size_t first = 0;
  if (knowledge_date_.has_value()) {
    // Llama 3.1+: BOS and the system block always come first; a leading
    // system message supplies the block's text.
    absl::string_view system;
    if (!messages.empty() && messages[0].role == "system") {
      system = Trim(messages[0].content);
      first = 1;
    }
    absl::StrAppend(&out, bos_text_, kStartHeader, "system", kEndHeader, "\n\n", kKnowledgeDate, *knowledge_date_, "\n",
                    "Today Date: ", today_date_, "\n\n", system, kEotId);
  } else if (!messages.empty()) {
    out = bos_text_;  // Llama 3.0 prefixes BOS to the first message
  }
  for (size_t i = first; i < messages.size(); ++i) {
    absl::StrAppend(&out, kStartHeader, messages[i].role, kEndHeader, "\n\n", Trim(messages[i].content), kEotId);
  }
  if (add_generation_prompt) absl::StrAppend(&out, kStartHeader, "assistant", kEndHeader, "\n\n");
  return out;
}

}  // namespace beacon
