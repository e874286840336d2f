#include "model/tokenizer/unicode.h"

#include <algorithm>

namespace beacon {
namespace {

using unicode_internal::CodepointRange;
using unicode_internal::kCodepointRanges;
using unicode_internal::kNumCodepointRanges;

inline bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Flags of U+0000..U+007F, looked up on every ASCII character of every
// prompt; built once from the generated table.
struct AsciiFlags {
  uint16_t flags[128];
  AsciiFlags() {
    for (uint32_t cp = 0; cp < 128; ++cp) flags[cp] = CodepointFlagsSlow(cp);
  }
  static uint16_t CodepointFlagsSlow(uint32_t cp) {
    const CodepointRange* end = kCodepointRanges + kNumCodepointRanges;
    const CodepointRange* it =
        std::upper_bound(kCodepointRanges, end, cp, [](uint32_t v, const CodepointRange& r) { return v < r.first; });
    return it == kCodepointRanges ? static_cast<uint16_t>(kCpUndefined) : (it - 1)->flags;
  }
};

// What one position of a byte string holds under strict UTF-8.
enum class SeqKind { kValid, kInvalid, kIncomplete };

// Classifies the sequence starting at bytes[i]. `*len` receives the length of
// a valid sequence, or of the maximal invalid subpart (at least 1), or of the
// incomplete tail (which then runs to the end of `bytes`).
SeqKind ClassifyStrict(std::string_view bytes, size_t i, size_t* len) {
  const unsigned char b0 = static_cast<unsigned char>(bytes[i]);
  if (b0 < 0x80) {
    *len = 1;
    return SeqKind::kValid;
  }
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *len = 1;  // continuation byte, C0/C1 or F5..FF: never a valid start
    return SeqKind::kInvalid;
  }
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= bytes.size()) {
      *len = k;
      return SeqKind::kIncomplete;
    }
    const unsigned char b = static_cast<unsigned char>(bytes[i + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : IsContinuation(b);
    if (!ok) {
      *len = k;
      return SeqKind::kInvalid;
    }
  }
  *len = need;
  return SeqKind::kValid;
}

}  // namespace

uint16_t CodepointFlags(uint32_t cp) {
  static const AsciiFlags* const ascii = new AsciiFlags();
  if (cp < 128) return ascii->flags[cp];
  if (cp > 0x10FFFF) return kCpUndefined;
  return AsciiFlags::CodepointFlagsSlow(cp);
}

const char* UnicodeTableVersion() { return unicode_internal::kUnicodeVersion; }

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  const size_t n = text.size();
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  while (i < n) {
    const unsigned char b0 = byte(i);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    // Sequence length from the lead byte's high bits; only the presence of
    // continuation bytes is checked (llama.cpp's rule, see unicode.h).
    size_t need = 0;
    uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
      need = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      need = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      need = 4;
      cp = b0 & 0x07;
    }
    bool ok = need != 0 && i + need <= n;
    for (size_t k = 1; ok && k < need; ++k) {
      if (!IsContinuation(byte(i + k))) ok = false;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (ok && cp > 0x10FFFF) ok = false;  // F5..F7 leads: not a code point
    if (!ok) {
      out.push_back(kReplacementChar);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += need;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

size_t Utf8CompletePrefix(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t len = 0;
    if (ClassifyStrict(bytes, i, &len) == SeqKind::kIncomplete) return i;
    i += len;
  }
  return i;
}

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t len = 0;
    if (ClassifyStrict(bytes, i, &len) == SeqKind::kValid) {
      out.append(bytes.substr(i, len));
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    i += len;
  }
  return out;
}

}  // namespace beacon
