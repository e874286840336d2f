// FrontDoor: what both front ends (server/grpc/, server/openai/) do with a
// request between their transport and the engine loop, in one place: whose
// it is (its API key, and the key's prefix-cache partition under
// --prefix-cache-salt-per-key), the request prepared for the engine
// (PrepareRequest: limits, chat template, tokens, KV options), and the
// accounting of a refusal (the rejected-requests counter and one log line
// naming the request). Authentication itself stays with each transport: gRPC
// answers UNAUTHENTICATED on the call, HTTP refuses in a gate before the body
// is read (http_routes.h, RequireApiKey); both match against `api_keys`.
//
// Thread-safety: const after construction; any thread.
#ifndef BEACON_SERVER_OPS_FRONT_DOOR_H_
#define BEACON_SERVER_OPS_FRONT_DOOR_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/serving/serve_request.h"
#include "server/ops/api_key.h"

namespace beacon {

struct FrontDoor {
  ServeLimits limits;
  ApiKeys api_keys;  // empty: no authentication
  // --prefix-cache-salt-per-key: a request's tenant is its API key's
  // (ServeRequest::tenant), so tenants never share prefix-cache blocks.
  bool prefix_cache_salt_per_key = false;
  // Hears every request refused before it reached the engine (bad input,
  // unauthenticated, busy, draining): the metrics' counter. May be empty.
  std::function<void(const absl::Status&)> on_rejected;

  // The partition of the caller with this authorization ("Bearer <key>"):
  // its key's tenant under prefix_cache_salt_per_key, else 0 (shared).
  uint64_t TenantOf(std::string_view authorization) const;
  // Sets r's tenant from `authorization`, then prepares it for the engine.
  // A refusal is counted and logged (Refused) before it is returned.
  absl::StatusOr<PreparedRequest> Prepare(ServeRequest& r, std::string_view authorization,
                                          const Tokenizer& tokenizer) const;
  // Counts a refusal and logs it at info level with the request's id (empty
  // when it has none yet).
  void Refused(const absl::Status& s, std::string_view request_id) const;
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_FRONT_DOOR_H_
