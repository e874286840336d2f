// API-key checks shared by the gRPC service and the HTTP routes.
//
// The comparison takes the same time whatever prefix of the key a guess
// gets right: `==` on strings returns at the first differing byte, which
// lets a client on a low-jitter path recover the key byte by byte from
// response times.
#ifndef BEACON_SERVER_OPS_API_KEY_H_
#define BEACON_SERVER_OPS_API_KEY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace beacon {

// True when `a` equals `b`. Runs in time that depends on the lengths only,
// never on where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// True when `authorization` is exactly "Bearer <key>" (the scheme as sent by
// OpenAI clients and gRPC metadata). REQUIRES: `key` is not empty.
bool BearerMatches(std::string_view authorization, std::string_view key);

// The API keys a server accepts (--api-key, and one per line of
// --api-key-file). Each key is a tenant: under --prefix-cache-salt-per-key
// requests under different keys never share prefix-cache blocks.
class ApiKeys {
 public:
  ApiKeys() = default;  // none: authentication is off
  // Empty keys are dropped (an empty key would let "Bearer " in).
  explicit ApiKeys(std::vector<std::string> keys);

  bool empty() const { return keys_.empty(); }
  int size() const { return static_cast<int>(keys_.size()); }

  // The index of the key "Bearer <key>" carries, -1 for none. Every key is
  // compared, each in constant time, so the time depends on the number and
  // lengths of the keys, never on which one (or which prefix) matched.
  int Match(std::string_view authorization) const;
  // Authentication is off, or `authorization` carries one of the keys.
  bool Allows(std::string_view authorization) const { return empty() || Match(authorization) >= 0; }
  // The tenant of key `index` (REQUIRES 0 <= index < size()): a nonzero
  // hash of the key, so the id does not change with the key's place in the
  // file. 0 for index -1 (no key: no tenant).
  uint64_t Tenant(int index) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_API_KEY_H_
