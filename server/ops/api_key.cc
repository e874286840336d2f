#include "server/ops/api_key.h"

#include <cstddef>
#include <cstdint>

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

}  // namespace beacon
