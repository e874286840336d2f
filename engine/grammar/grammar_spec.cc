#include "engine/grammar/grammar_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/utf8.h"

namespace beacon {
namespace {

absl::Status Error(const GrammarSpec& spec, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(spec.field.empty() ? "grammar" : spec.field, ": ", std::string(what)));
}

}  // namespace

std::string_view GrammarKindName(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonObject: return "json_object";
    case GrammarKind::kJsonSchema: return "json_schema";
    case GrammarKind::kRegex: return "regex";
    case GrammarKind::kEbnf: return "grammar";
    case GrammarKind::kChoice: return "choice";
    case GrammarKind::kStructuralTag: return "structural_tag";
  }
  return "unknown";
}

absl::Status GrammarSpec::Validate(const GrammarLimits& limits) const {
  if (static_cast<int64_t>(source.size()) > limits.max_source_bytes) {
    return Error(*this, absl::StrFormat("is %d bytes; at most %d", source.size(), limits.max_source_bytes));
  }
  if (!IsValidUtf8(source)) return Error(*this, "is not valid UTF-8");
  switch (kind) {
    case GrammarKind::kJsonObject: break;
    case GrammarKind::kChoice:
      if (choices.empty()) return Error(*this, "needs at least one choice");
      if (static_cast<int64_t>(choices.size()) > limits.max_choices) {
        return Error(*this, absl::StrFormat("has %d choices; at most %d", choices.size(), limits.max_choices));
      }
      for (size_t i = 0; i < choices.size(); ++i) {
        const std::string& c = choices[i];
        if (c.empty()) return Error(*this, absl::StrFormat("choice %d is empty", i));
        if (static_cast<int64_t>(c.size()) > limits.max_choice_bytes) {
          return Error(*this,
                       absl::StrFormat("choice %d is %d bytes; at most %d", i, c.size(), limits.max_choice_bytes));
        }
        if (!IsValidUtf8(c)) return Error(*this, absl::StrFormat("choice %d is not valid UTF-8", i));
      }
      break;
    default:
      if (source.empty()) return Error(*this, "is empty");
  }
  return absl::OkStatus();
}

std::string GrammarSpec::CacheKey() const {
  std::string key = absl::StrCat(std::string(GrammarKindName(kind)), strict ? "/strict\n" : "/loose\n");
  if (kind == GrammarKind::kChoice) return absl::StrCat(key, ChoiceEbnf(choices));
  return absl::StrCat(key, source);
}

std::string ChoiceEbnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += " | ";
    out += '"';
    for (unsigned char c : choices[i]) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7f) {
        out += absl::StrFormat("\\u%04x", c);  // fixed width: \x would swallow following hex digits
      } else {
        out += static_cast<char>(c);  // UTF-8 bytes pass as they are
      }
    }
    out += '"';
  }
  return out;
}

}  // namespace beacon
