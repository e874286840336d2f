#include "engine/tools/tool_parser.h"

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace beacon {
namespace {

using nlohmann::json;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
std::string_view StripLeading(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view StripTrailing(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}
std::string_view Strip(std::string_view s) { return StripTrailing(StripLeading(s)); }
bool ConsumePrefix(std::string_view* s, std::string_view p) {
  if (!s->starts_with(p)) return false;
  s->remove_prefix(p.size());
  return true;
}
bool ConsumeSuffix(std::string_view* s, std::string_view p) {
  if (!s->ends_with(p)) return false;
  s->remove_suffix(p.size());
  return true;
}

bool Known(const std::vector<std::string>& tools, const std::string& name) {
  return std::find(tools.begin(), tools.end(), name) != tools.end();
}

// A call from its name and arguments (an object, or a string holding one,
// as some models write them).
std::optional<ParsedToolCall> MakeCall(const json& name, const json* args, const std::vector<std::string>& tools) {
  if (!name.is_string() || !Known(tools, name.get<std::string>())) return std::nullopt;
  json a = json::object();
  if (args != nullptr) {
    a = *args;
    if (a.is_string()) a = json::parse(a.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (a.is_null()) a = json::object();
  }
  if (!a.is_object()) return std::nullopt;
  return ParsedToolCall{name.get<std::string>(), a.dump()};
}

// {"name": ..., "arguments" | "parameters": {...}}
std::optional<ParsedToolCall> CallFromObject(std::string_view text, const std::vector<std::string>& tools) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name")) return std::nullopt;
  const json* args = nullptr;
  if (auto it = j.find("arguments"); it != j.end()) args = &*it;
  if (auto it = j.find("parameters"); args == nullptr && it != j.end()) args = &*it;
  return MakeCall(j["name"], args, tools);
}

// Splits "A; B" where A and B are JSON objects, minding strings; nullopt
// when the text is not such a list.
std::optional<std::vector<std::string_view>> SplitObjects(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (true) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (i == text.size() || text[i] != '{') return std::nullopt;
    const size_t begin = i;
    int depth = 0;
    bool in_string = false, escaped = false;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (i == text.size()) return std::nullopt;
    out.push_back(text.substr(begin, ++i - begin));
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (i == text.size()) return out;
    if (text[i] != ';' && text[i] != ',') return std::nullopt;
    ++i;
  }
}

ParsedAnswer ParseLlama(std::string_view text, const std::vector<std::string>& tools) {
  std::string_view body = StripLeading(text);
  ConsumePrefix(&body, "<|python_tag|>");
  ParsedAnswer out;
  std::optional<std::vector<std::string_view>> objects = SplitObjects(body);
  if (objects.has_value()) {
    for (std::string_view o : *objects) {
      std::optional<ParsedToolCall> call = CallFromObject(o, tools);
      if (!call.has_value()) {
        out.calls.clear();
        break;
      }
      out.calls.push_back(std::move(*call));
    }
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

// Where a call may begin: its opening marker and the marker that closes it.
struct Opening {
  size_t at = std::string_view::npos;
  std::string_view open, close;
};

// hermes: <tool_call>...</tool_call>, and a ```json fence holding a call
// object, which Qwen2.5-Coder writes instead of the tags (llama.cpp's parser
// takes both too); deepseek_r1: a call between its markers.
constexpr std::string_view kFenceOpen = "```json";
constexpr std::string_view kFenceClose = "```";

Opening FindOpening(ToolCallFormat format, std::string_view text, size_t from) {
  Opening o;
  auto consider = [&](std::string_view open, std::string_view close) {
    const size_t at = text.find(open, from);
    if (at < o.at) o = Opening{at, open, close};
  };
  if (format == ToolCallFormat::kDeepSeekR1) {
    consider(kR1CallBegin, kR1CallEnd);
  } else {
    consider("<tool_call>", "</tool_call>");
    consider(kFenceOpen, kFenceClose);
  }
  return o;
}

// Text between a call's markers is a call: hermes and deepseek_r1.
ParsedAnswer ParseTagged(ToolCallFormat format, std::string_view text, const std::vector<std::string>& tools) {
  const bool r1 = format == ToolCallFormat::kDeepSeekR1;
  ParsedAnswer out;
  size_t pos = 0;
  while (pos < text.size()) {
    const Opening o = FindOpening(format, text, pos);
    const size_t b = o.at;
    if (b == std::string_view::npos) {
      out.content.append(text.substr(pos));
      break;
    }
    std::string_view before = text.substr(pos, b - pos);
    if (r1) ConsumeSuffix(&before, kR1CallsBegin);
    const size_t e = text.find(o.close, b + o.open.size());
    const size_t body_end = e == std::string_view::npos ? text.size() : e;
    const size_t next = e == std::string_view::npos ? text.size() : e + o.close.size();
    std::string_view body = text.substr(b + o.open.size(), body_end - b - o.open.size());
    std::optional<ParsedToolCall> call;
    if (r1) {
      // function<｜tool▁sep｜>NAME\n```json\n{...}\n```
      const size_t sep = body.find(kR1Sep);
      if (sep != std::string_view::npos) {
        std::string_view rest = body.substr(sep + kR1Sep.size());
        const size_t nl = rest.find('\n');
        std::string_view name = Strip(rest.substr(0, nl));
        std::string_view args = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
        args = Strip(args);
        ConsumePrefix(&args, "```json");
        ConsumeSuffix(&args, "```");
        const json a = json::parse(args, nullptr, /*allow_exceptions=*/false);
        call = MakeCall(json(std::string(name)), &a, tools);
      }
    } else {
      call = CallFromObject(Strip(body), tools);
    }
    if (call.has_value()) {
      out.content.append(r1 ? before : text.substr(pos, b - pos));
      out.calls.push_back(std::move(*call));
    } else {
      out.content.append(text.substr(pos, next - pos));  // a malformed call stays as the model wrote it
    }
    pos = next;
    if (call.has_value()) {
      // After a call, the format's newlines (and R1's end of the list) are not text.
      pos = text.size() - StripLeading(text.substr(pos)).size();
      if (r1 && text.substr(pos).starts_with(kR1CallsEnd)) pos += kR1CallsEnd.size();
    }
  }
  if (!out.calls.empty() && Strip(out.content).empty()) out.content.clear();
  return out;
}

// The longest suffix of `text` that is a proper prefix of `marker`.
size_t PartialMarker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.substr(0, n) == text.substr(text.size() - n)) return n;
  }
  return 0;
}

}  // namespace

std::string NewToolCallId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("call_%016x%08x", rng(), static_cast<uint32_t>(rng()));
}

ParsedAnswer ParseToolCalls(ToolCallFormat format, std::string_view text, const std::vector<std::string>& tools) {
  if (format == ToolCallFormat::kLlama3Json) return ParseLlama(text, tools);
  return ParseTagged(format, text, tools);
}

ToolCallStream::ToolCallStream(ToolCallFormat format, std::vector<std::string> tools)
    : format_(format), tools_(std::move(tools)) {}

ParsedAnswer ToolCallStream::Push(std::string_view text) {
  held_.append(text);
  return Drain(false);
}

ParsedAnswer ToolCallStream::Finish() { return Drain(true); }

ParsedAnswer ToolCallStream::Drain(bool final) {
  ParsedAnswer out;
  if (format_ == ToolCallFormat::kLlama3Json) {
    // A call list is the whole answer: decided by its first non-space character.
    if (!started_) {
      const std::string_view s = StripLeading(held_);
      constexpr std::string_view kTag = "<|python_tag|>";
      if (!final && (s.empty() || (s.size() < kTag.size() && kTag.starts_with(s)))) return out;
      started_ = true;
      whole_answer_ = s.starts_with("{") || s.starts_with(kTag);
    }
    if (whole_answer_ && !final) return out;
    if (whole_answer_)
      out = ParseLlama(held_, tools_);
    else
      out.content = held_;
    held_.clear();
    calls_ += static_cast<int>(out.calls.size());
    return out;
  }
  const bool r1 = format_ == ToolCallFormat::kDeepSeekR1;
  // What may begin a call: R1's list marker too, so that it is held back whole.
  const std::vector<std::string_view> starts = r1 ? std::vector<std::string_view>{kR1CallsBegin, kR1CallBegin}
                                                  : std::vector<std::string_view>{"<tool_call>", kFenceOpen};
  for (;;) {
    if (calls_ + out.calls.size() > 0) {
      // After a call: its newlines and R1's end of the list are not text (once whole).
      const std::string_view t = StripLeading(held_);
      const size_t space = held_.size() - t.size();
      if (r1 && t.starts_with(kR1CallsEnd)) {
        held_.erase(0, space + kR1CallsEnd.size());
        continue;
      }
      if (!final && (t.empty() || (r1 && PartialMarker(t, kR1CallsEnd) == t.size()))) break;
      held_.erase(0, space);
    }
    const Opening o = FindOpening(format_, held_, 0);
    size_t b = o.at;
    if (r1) b = std::min(b, held_.find(kR1CallsBegin));
    if (b == std::string::npos) {
      // Text, less what may begin a call.
      size_t keep = 0;
      for (std::string_view m : starts) keep = std::max(keep, final ? 0 : PartialMarker(held_, m));
      out.content.append(held_, 0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      break;
    }
    size_t e = o.at == std::string::npos ? std::string::npos : held_.find(o.close, o.at + o.open.size());
    if (e == std::string::npos && !final) {
      out.content.append(held_, 0, b);
      held_.erase(0, b);
      break;
    }
    size_t stop = e == std::string::npos ? held_.size() : e + o.close.size();
    if (r1 && e != std::string::npos) {
      const std::string_view after = std::string_view(held_).substr(stop);
      const std::string_view trimmed = StripLeading(after);
      if (trimmed.starts_with(kR1CallsEnd)) stop += after.size() - trimmed.size() + kR1CallsEnd.size();
    }
    ParsedAnswer piece = ParseTagged(format_, std::string_view(held_).substr(0, stop), tools_);
    out.content += piece.content;
    for (ParsedToolCall& c : piece.calls) out.calls.push_back(std::move(c));
    held_.erase(0, stop);
    if (held_.empty()) break;
  }
  calls_ += static_cast<int>(out.calls.size());
  // Between and after calls the format's newlines are not content.
  if (calls_ > 0 && Strip(out.content).empty()) out.content.clear();
  return out;
}

}  // namespace beacon
