// Helpers shared by the tokenizer tests: toy byte-level vocabularies built in
// the test, and the JSONL fixtures under tests/fixtures/.
#ifndef BEACON_TESTS_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_
#define BEACON_TESTS_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_

#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/tokenizer_data.h"
#include "nlohmann/json.hpp"

namespace beacon::testing {

// Raw bytes -> byte-level token text ("a b" -> "aĠb").
inline std::string ByteLevel(std::string_view raw) {
  std::string s;
  AppendByteLevel(raw, &s);
  return s;
}

// A toy vocabulary: ids 0..255 are the 256 byte characters (id == byte
// value), then one token per merge result in merge order, then `specials`
// (control type) and `user_defined` tokens. Merges are given as raw-text
// pairs: {"h", "e"} is the merge "h e" producing "he".
inline TokenizerData ToyData(const std::vector<std::pair<std::string, std::string>>& merges,
                             const std::vector<std::string>& specials = {},
                             const std::vector<std::string>& user_defined = {}, std::string pre = "smollm") {
  TokenizerData d;
  d.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) d.tokens.push_back(ByteLevel(std::string(1, static_cast<char>(b))));
  d.token_types.assign(256, TokenType::kNormal);
  for (const auto& [l, r] : merges) {
    d.merges.push_back(ByteLevel(l) + " " + ByteLevel(r));
    const std::string joined = ByteLevel(l + r);
    bool present = false;
    for (const auto& t : d.tokens) present = present || t == joined;
    if (!present) {
      d.tokens.push_back(joined);
      d.token_types.push_back(TokenType::kNormal);
    }
  }
  for (const auto& s : specials) {
    d.tokens.push_back(s);
    d.token_types.push_back(TokenType::kControl);
  }
  for (const auto& s : user_defined) {
    d.tokens.push_back(s);
    d.token_types.push_back(TokenType::kUserDefined);
  }
  return d;
}

inline std::string FixturePath(std::string_view relative) {
  return std::string(BEACON_SOURCE_DIR) + "/tests/fixtures/" + std::string(relative);
}

// Every line of a JSONL file, parsed; empty when the file cannot be read.
inline std::vector<nlohmann::json> ReadJsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::vector<int32_t> Ids(const nlohmann::json& array) { return array.get<std::vector<int32_t>>(); }

}  // namespace beacon::testing

#endif  // BEACON_TESTS_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_
