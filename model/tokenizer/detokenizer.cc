// IncrementalDetokenizer (declared in tokenizer.h).
//
// Contract: the concatenation of every Push() result and the final Flush()
// equals SanitizeUtf8(Decode(all ids)), and each returned delta is valid UTF-8
// on its own. Bytes that may still become a character wait in `pending_`;
// bytes that can no longer become one are replaced by U+FFFD as soon as that
// is certain (when the next byte arrives, or at Flush).

#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace beacon {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string IncrementalDetokenizer::Push(int32_t id) {
  pending_ += tokenizer_->TokenBytes(id, render_special_);
  const size_t complete = Utf8CompletePrefix(pending_);
  if (complete == 0) return std::string();
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace beacon
