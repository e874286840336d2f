#include "model/tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace beacon::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// "\r\n" and "\r" become "\n"; one trailing newline is dropped
// (keep_trailing_newline=False).
std::string Normalise(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s.push_back(in[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    size_t pos = 0;
    bool strip_next = false;  // the previous tag ended with '-'
    bool trim_next = false;   // trim_blocks: drop one newline after a block/comment
    while (pos < src_.size()) {
      size_t open = FindOpen(pos);
      std::string text = src_.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      if (strip_next) {
        text.erase(0, std::find_if(text.begin(), text.end(), [](char c) { return !IsSpace(c); }) - text.begin());
      } else if (trim_next && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
      strip_next = trim_next = false;
      if (open == std::string::npos) {
        Emit(Token::Kind::kText, std::move(text), pos);
        break;
      }
      const char type = src_[open + 1];  // '{', '%' or '#'
      const char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (type != '{' && modifier != '+') {
        // lstrip_blocks: spaces and tabs between the line start and the tag.
        size_t k = text.size();
        while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
        if (k == 0 ? (open - text.size() == 0 || src_[open - text.size() - 1] == '\n') : text[k - 1] == '\n') {
          text.resize(k);
        }
      }
      Emit(Token::Kind::kText, std::move(text), pos);
      pos = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (type == '#') {
        const size_t close = src_.find("#}", pos);
        if (close == std::string::npos) return Error(open, "unterminated comment");
        strip_next = close > pos && src_[close - 1] == '-';
        trim_next = !(close > pos && src_[close - 1] == '+');
        pos = close + 2;
        continue;
      }
      const bool block = type == '%';
      const size_t first_token = tokens_.size();
      Emit(block ? Token::Kind::kBlockBegin : Token::Kind::kVarBegin, "", open);
      absl::StatusOr<size_t> end = LexTag(pos, block, &strip_next, &trim_next);
      if (!end.ok()) return end.status();
      pos = *end;
      if (block && tokens_.size() == first_token + 3 && tokens_[first_token + 1].value == "raw") {
        absl::Status raw = LexRaw(&pos, &strip_next, &trim_next);
        if (!raw.ok()) return raw;
      }
    }
    Emit(Token::Kind::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindOpen(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void Emit(Token::Kind kind, std::string value, size_t offset) {
    if (kind == Token::Kind::kText && value.empty()) return;
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    tokens_.push_back(
        {kind, std::move(value), static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(offset - *it) + 1});
  }

  absl::Status Error(size_t offset, const std::string& what) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return absl::InvalidArgumentError(
        absl::StrCat("template line ", it - line_starts_.begin() + 1, ", column ", offset - *it + 1, ": ", what));
  }

  // Lexes the inside of a {{ }} or {% %} tag from `pos`; returns the offset
  // after its closer.
  absl::StatusOr<size_t> LexTag(size_t pos, bool block, bool* strip_next, bool* trim_next) {
    const char closer = block ? '%' : '}';
    int depth = 0;
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) return Error(pos, block ? "unterminated block tag" : "unterminated expression");
      const char c = src_[pos];
      auto closes_at = [&](size_t p) { return p + 1 < src_.size() && src_[p] == closer && src_[p + 1] == '}'; };
      if (depth == 0 && (c == '-' || c == '+') && closes_at(pos + 1) && (c == '-' || block)) {
        Emit(block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, "", pos);
        *strip_next = c == '-';
        *trim_next = false;
        return pos + 3;
      }
      if (depth == 0 && closes_at(pos)) {
        Emit(block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, "", pos);
        *trim_next = block;
        return pos + 2;
      }
      if (IsNameStart(c)) {
        size_t e = pos;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        Emit(Token::Kind::kName, src_.substr(pos, e - pos), pos);
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = LexNumber(pos);
      } else if (c == '\'' || c == '"') {
        absl::StatusOr<size_t> e = LexString(pos);
        if (!e.ok()) return e.status();
        pos = *e;
      } else {
        static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                    "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                                    "]",  "{",  "}",  ",",  ".",  ":",  "|"};
        std::string_view op;
        for (std::string_view o : kOps) {
          if (src_.compare(pos, o.size(), o) == 0) {
            op = o;
            break;
          }
        }
        if (op.empty()) return Error(pos, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        Emit(Token::Kind::kOp, std::string(op), pos);
        pos += op.size();
      }
    }
  }

  size_t LexNumber(size_t pos) {
    size_t e = pos;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = x;
        digits();
        is_float = true;
      }
    }
    std::string text = src_.substr(pos, e - pos);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Emit(is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::move(text), pos);
    return e;
  }

  absl::StatusOr<size_t> LexString(size_t pos) {
    const char quote = src_[pos];
    std::string out;
    size_t i = pos + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\' || i + 1 == src_.size()) {
        out.push_back(src_[i]);
        continue;
      }
      const char e = src_[++i];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case '0': out.push_back('\0'); break;
        case '\n': break;  // line continuation
        case '\\':
        case '\'':
        case '"': out.push_back(e); break;
        default:
          out.push_back('\\');  // Python keeps unknown escapes as written
          out.push_back(e);
          break;
      }
    }
    if (i >= src_.size()) return Error(pos, "unterminated string literal");
    Emit(Token::Kind::kString, std::move(out), pos);
    return i + 1;
  }

  // {% raw %}...{% endraw %}: the text in between is literal.
  absl::Status LexRaw(size_t* pos, bool* strip_next, bool* trim_next) {
    tokens_.resize(tokens_.size() - 3);  // the raw tag itself
    for (size_t open = src_.find("{%", *pos); open != std::string::npos; open = src_.find("{%", open + 1)) {
      size_t p = open + 2;
      const bool strip_before = p < src_.size() && src_[p] == '-';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      std::string text = src_.substr(*pos, open - *pos);
      if (*strip_next) {
        text.erase(0, std::find_if(text.begin(), text.end(), [](char c) { return !IsSpace(c); }) - text.begin());
      } else if (*trim_next && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
      if (strip_before) {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      Emit(Token::Kind::kText, std::move(text), *pos);
      const size_t mark = tokens_.size();
      absl::StatusOr<size_t> end = LexTag(p + 6, /*block=*/true, strip_next, trim_next);
      if (!end.ok()) return end.status();
      tokens_.resize(mark);
      *pos = *end;
      return absl::OkStatus();
    }
    return Error(*pos, "unterminated raw block (no {% endraw %})");
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) { return Lexer(Normalise(source)).Run(); }

}  // namespace beacon::jinja
