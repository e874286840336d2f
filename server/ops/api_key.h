// API-key checks shared by the gRPC service and the HTTP routes.
//
// The comparison takes the same time whatever prefix of the key a guess
// gets right: `==` on strings returns at the first differing byte, which
// lets a client on a low-jitter path recover the key byte by byte from
// response times.
#ifndef BEACON_SERVER_OPS_API_KEY_H_
#define BEACON_SERVER_OPS_API_KEY_H_

#include <string_view>

namespace beacon {

// True when `a` equals `b`. Runs in time that depends on the lengths only,
// never on where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// True when `authorization` is exactly "Bearer <key>" (the scheme as sent by
// OpenAI clients and gRPC metadata). REQUIRES: `key` is not empty.
bool BearerMatches(std::string_view authorization, std::string_view key);

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_API_KEY_H_
