#include "model/tokenizer/byte_level.h"

#include <array>

#include "model/tokenizer/unicode.h"

namespace beacon {
namespace {

bool StandsForItself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 0x144> from_cp{};  // every mapped code point is < U+0144
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = StandsForItself(b) ? static_cast<uint32_t>(b) : next_extra++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
      to_utf8[b] = EncodeUtf8(to_cp[b]);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables* const tables = new ByteTables();
  return *tables;
}

}  // namespace

uint32_t ByteToCodepoint(uint8_t b) { return Tables().to_cp[b]; }

int ByteFromCodepoint(uint32_t cp) {
  const auto& from = Tables().from_cp;
  return cp < from.size() ? from[cp] : -1;
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const ByteTables& t = Tables();
  for (char c : bytes) out->append(t.to_utf8[static_cast<uint8_t>(c)]);
}

std::string DecodeByteLevel(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (uint32_t cp : DecodeUtf8Lenient(token_text)) {
    const int b = ByteFromCodepoint(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      AppendUtf8(cp, &out);
    }
  }
  return out;
}

}  // namespace beacon
