#include "model/tokenizer/pretokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/tokenizer/unicode.h"

namespace beacon {
namespace {

struct NamedPreTokenizer {
  const char* name;
  PreTokenizerInfo info;
};

// The names llama.cpp maps to each family (src/llama-vocab.cpp), plus "gpt2"
// as an alias of "gpt-2".
constexpr NamedPreTokenizer kPreTokenizers[] = {
    {"default", {PreTokenizerKind::kDefault, false}},
    {"gpt2", {PreTokenizerKind::kGpt2, false}},
    {"gpt-2", {PreTokenizerKind::kGpt2, false}},
    {"phi-2", {PreTokenizerKind::kGpt2, false}},
    {"mpt", {PreTokenizerKind::kGpt2, false}},
    {"olmo", {PreTokenizerKind::kGpt2, false}},
    {"jais", {PreTokenizerKind::kGpt2, false}},
    {"smollm", {PreTokenizerKind::kStarCoder, false}},
    {"starcoder", {PreTokenizerKind::kStarCoder, false}},
    {"refact", {PreTokenizerKind::kStarCoder, false}},
    {"command-r", {PreTokenizerKind::kStarCoder, false}},
    {"codeshell", {PreTokenizerKind::kStarCoder, false}},
    {"exaone", {PreTokenizerKind::kStarCoder, false}},
    {"minerva-7b", {PreTokenizerKind::kStarCoder, false}},
    {"llama3", {PreTokenizerKind::kLlama3, true}},
    {"llama-v3", {PreTokenizerKind::kLlama3, true}},
    {"llama-bpe", {PreTokenizerKind::kLlama3, true}},
    {"falcon3", {PreTokenizerKind::kLlama3, true}},
    {"dbrx", {PreTokenizerKind::kLlama3, false}},
    {"smaug-bpe", {PreTokenizerKind::kLlama3, false}},
    {"qwen2", {PreTokenizerKind::kQwen2, false}},
    {"deepseek-r1-qwen", {PreTokenizerKind::kQwen2, false}},
    {"stablelm2", {PreTokenizerKind::kQwen2, false}},
    {"megrez", {PreTokenizerKind::kQwen2, false}},
};

constexpr uint32_t kOutside = 0xFFFFFFFFu;

// One piece being split: code points and flags, with reads outside
// [begin, end) answering "nothing" (flags 0), as llama.cpp's matchers do, so
// that look-aheads stop at the piece's end.
class Piece {
 public:
  Piece(const std::vector<uint32_t>& cps, const std::vector<uint16_t>& flags, CodepointSpan span)
      : cps_(cps), flags_(flags), begin_(span.begin), end_(span.end), prev_end_(span.begin) {}

  uint32_t cp(size_t pos) const { return pos >= begin_ && pos < end_ ? cps_[pos] : kOutside; }
  uint16_t flags(size_t pos) const { return pos >= begin_ && pos < end_ ? flags_[pos] : 0; }
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

  // Ends the current word at `end` (nothing is emitted for an empty word).
  void Emit(size_t end, std::vector<CodepointSpan>* out) {
    if (end > prev_end_) out->push_back({static_cast<uint32_t>(prev_end_), static_cast<uint32_t>(end)});
    prev_end_ = end;
  }

 private:
  const std::vector<uint32_t>& cps_;
  const std::vector<uint16_t>& flags_;
  size_t begin_, end_, prev_end_;
};

inline bool IsWsLetterOrNumber(uint16_t f) { return (f & (kCpWhitespace | kCpLetter | kCpNumber)) != 0; }

// [^\s\p{L}\p{N}] inside the piece (flags 0 means "outside").
inline bool IsOther(uint16_t f) { return f != 0 && !IsWsLetterOrNumber(f); }

inline uint32_t AsciiLower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's 't 're 've 'm 'll 'd at `pos`; returns the length matched (0 if none).
size_t MatchContraction(const Piece& p, size_t pos, bool ignore_case) {
  if (p.cp(pos) != '\'') return 0;
  auto lower = [&](size_t k) { return ignore_case ? AsciiLower(p.cp(k)) : p.cp(k); };
  const uint32_t c1 = lower(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  const uint32_t c2 = lower(pos + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2(Piece p, std::vector<CodepointSpan>* out) {
  for (size_t pos = p.begin(); pos < p.end();) {
    const uint32_t cp = p.cp(pos);
    if (size_t n = MatchContraction(p, pos, /*ignore_case=*/false)) {
      pos += n;
      p.Emit(pos, out);
      continue;
    }
    // An optional leading space joins the run that follows it.
    const size_t start = pos + (cp == ' ' ? 1 : 0);
    const uint16_t f = p.flags(start);
    if (IsLetter(f) || IsNumber(f) || IsOther(f)) {
      const uint16_t cls = IsLetter(f) ? kCpLetter : IsNumber(f) ? kCpNumber : 0;
      pos = start;
      while (cls != 0 ? (p.flags(pos) & cls) != 0 : IsOther(p.flags(pos))) ++pos;
      p.Emit(pos, out);
      continue;
    }
    size_t n_ws = 0;
    while (IsWhitespace(p.flags(pos + n_ws))) ++n_ws;
    if (n_ws > 1 && p.cp(pos + n_ws) != kOutside) {
      pos += n_ws - 1;  // \s+(?!\S): leave the last space to the next word
    } else if (n_ws > 0) {
      pos += n_ws;
    } else {
      ++pos;  // nothing matches: a word of its own
    }
    p.Emit(pos, out);
  }
}

// Llama 3 (and Qwen2 with max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void SplitLlama3(Piece p, size_t max_digits, std::vector<CodepointSpan>* out) {
  for (size_t pos = p.begin(); pos < p.end();) {
    const uint32_t cp = p.cp(pos);
    const uint16_t f = p.flags(pos);
    if (size_t n = MatchContraction(p, pos, /*ignore_case=*/true)) {
      pos += n;
      p.Emit(pos, out);
      continue;
    }
    if (!(cp == '\r' || cp == '\n' || IsNumber(f)) && (IsLetter(f) || IsLetter(p.flags(pos + 1)))) {
      ++pos;  // the optional non-letter prefix, or the first letter
      while (IsLetter(p.flags(pos))) ++pos;
      p.Emit(pos, out);
      continue;
    }
    if (IsNumber(f)) {
      size_t group_begin = pos;
      while (IsNumber(p.flags(pos))) {
        if (++pos - group_begin >= max_digits) {
          p.Emit(pos, out);
          group_begin = pos;
        }
      }
      p.Emit(pos, out);
      continue;
    }
    const uint16_t f2 = cp == ' ' ? p.flags(pos + 1) : f;
    if (!IsWsLetterOrNumber(f2)) {
      // A space followed by the piece's end lands here too and becomes " ",
      // which is also what \s+ would give it.
      pos += cp == ' ' ? 1 : 0;
      while (IsOther(p.flags(pos))) ++pos;
      while (p.cp(pos) == '\r' || p.cp(pos) == '\n') ++pos;
      p.Emit(pos, out);
      continue;
    }
    size_t n_ws = 0;
    size_t last_newline_end = 0;
    while (IsWhitespace(p.flags(pos + n_ws))) {
      const uint32_t c = p.cp(pos + n_ws);
      if (c == '\r' || c == '\n') last_newline_end = pos + n_ws + 1;
      ++n_ws;
    }
    if (last_newline_end > 0) {
      pos = last_newline_end;  // \s*[\r\n]+
    } else if (n_ws > 1 && p.cp(pos + n_ws) != kOutside) {
      pos += n_ws - 1;  // \s+(?!\S)
    } else if (n_ws > 0) {
      pos += n_ws;
    } else {
      ++pos;
    }
    p.Emit(pos, out);
  }
}

// A regex that matches runs (or, with `single`, single code points) of one
// class: matches and the text between them both become pieces.
template <typename Pred>
void SplitRuns(Piece p, bool single, Pred in_class, std::vector<CodepointSpan>* out) {
  for (size_t pos = p.begin(); pos < p.end();) {
    if (in_class(pos)) {
      p.Emit(pos, out);  // the gap before the match
      ++pos;
      while (!single && pos < p.end() && in_class(pos)) ++pos;
      p.Emit(pos, out);
    } else {
      ++pos;
    }
  }
  p.Emit(p.end(), out);
}

// [0-9][0-9][0-9]: ASCII digit triples, scanning left to right.
void SplitDigitTriples(Piece p, std::vector<CodepointSpan>* out) {
  auto digit = [&](size_t k) { return p.cp(k) >= '0' && p.cp(k) <= '9'; };
  for (size_t pos = p.begin(); pos < p.end();) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      p.Emit(pos, out);
      pos += 3;
      p.Emit(pos, out);
    } else {
      ++pos;
    }
  }
  p.Emit(p.end(), out);
}

// [\p{P}\$\+<=>\^~\|] as llama.cpp evaluates it: ASCII punctuation and
// symbols except '`', and non-ASCII code points of category P.
bool IsDefaultPunct(uint32_t cp, uint16_t f) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x5F) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return !IsWhitespace(f) && (f & kCpCategoryMask) == kCpPunctuation;
}

}  // namespace

absl::StatusOr<PreTokenizerInfo> LookupPreTokenizer(std::string_view name) {
  for (const auto& entry : kPreTokenizers) {
    if (name == entry.name) return entry.info;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported pre-tokenizer '", std::string(name),
                                                 "' (tokenizer.ggml.pre); supported: ", SupportedPreTokenizerNames()));
}

std::string SupportedPreTokenizerNames() {
  std::vector<std::string> names;
  for (const auto& entry : kPreTokenizers) names.push_back(entry.name);
  return absl::StrJoin(names, ", ");
}

std::vector<CodepointSpan> PreTokenizer::SplitCodepoints(const std::vector<uint32_t>& cps) const {
  std::vector<uint16_t> flags(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) flags[i] = CodepointFlags(cps[i]);

  std::vector<CodepointSpan> pieces;
  if (!cps.empty()) pieces.push_back({0, static_cast<uint32_t>(cps.size())});
  std::vector<CodepointSpan> next;
  // Applies one split to every current piece.
  auto apply = [&](auto&& split_one) {
    next.clear();
    for (const CodepointSpan& span : pieces) split_one(Piece(cps, flags, span), &next);
    pieces.swap(next);
  };
  auto number = [&](size_t k) { return IsNumber(flags[k]) && !IsWhitespace(flags[k]); };
  auto punct = [&](size_t k) { return IsDefaultPunct(cps[k], flags[k]); };

  switch (kind_) {
    case PreTokenizerKind::kDefault:
      apply([&](Piece p, auto* out) { SplitRuns(p, /*single=*/false, punct, out); });
      apply([&](Piece p, auto* out) { SplitGpt2(p, out); });
      apply([&](Piece p, auto* out) { SplitRuns(p, /*single=*/false, number, out); });
      apply([&](Piece p, auto* out) { SplitDigitTriples(p, out); });
      break;
    case PreTokenizerKind::kGpt2: apply([&](Piece p, auto* out) { SplitGpt2(p, out); }); break;
    case PreTokenizerKind::kStarCoder:
      apply([&](Piece p, auto* out) { SplitRuns(p, /*single=*/true, number, out); });
      apply([&](Piece p, auto* out) { SplitGpt2(p, out); });
      break;
    case PreTokenizerKind::kLlama3: apply([&](Piece p, auto* out) { SplitLlama3(p, 3, out); }); break;
    case PreTokenizerKind::kQwen2: apply([&](Piece p, auto* out) { SplitLlama3(p, 1, out); }); break;
  }
  return pieces;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string>* words) const {
  const std::vector<uint32_t> cps = DecodeUtf8Lenient(text);
  for (const CodepointSpan& span : SplitCodepoints(cps)) {
    std::string word;
    word.reserve(4 * (span.end - span.begin));
    for (uint32_t k = span.begin; k < span.end; ++k) AppendUtf8(cps[k], &word);
    words->push_back(std::move(word));
  }
}

}  // namespace beacon
