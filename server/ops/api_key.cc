#include "server/ops/api_key.h"

#include <cstddef>
#include <cstdint>

#include "util/splitmix.h"

namespace beacon {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walks the whole of `b` (the secret side in our callers) whatever `a` is,
  // folding every difference, the length's included, into one accumulator.
  // volatile keeps the compiler from turning the loop into an early exit.
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    diff = diff | static_cast<uint8_t>(x ^ static_cast<uint8_t>(b[i]));
  }
  return diff == 0;
}

bool BearerMatches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.substr(0, kScheme.size()) != kScheme) return false;  // the scheme is public
  return ConstantTimeEquals(authorization.substr(kScheme.size()), key);
}

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (std::string& k : keys) {
    if (!k.empty()) keys_.push_back(std::move(k));
  }
}

int ApiKeys::Match(std::string_view authorization) const {
  int found = -1;
  for (int i = 0; i < size(); ++i) {
    // No early exit: a later key costs its comparison whether or not an
    // earlier one matched.
    const bool eq = BearerMatches(authorization, keys_[static_cast<size_t>(i)]);
    found = eq && found < 0 ? i : found;
  }
  return found;
}

uint64_t ApiKeys::Tenant(int index) const {
  if (index < 0 || index >= size()) return 0;
  // FNV-1a, then SplitMix64: stable across runs and builds.
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : keys_[static_cast<size_t>(index)]) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  h = SplitMix64(h);
  return h == 0 ? 1 : h;
}

}  // namespace beacon
