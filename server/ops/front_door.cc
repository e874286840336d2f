#include "server/ops/front_door.h"

#include "util/log.h"

namespace beacon {

uint64_t FrontDoor::TenantOf(std::string_view authorization) const {
  return prefix_cache_salt_per_key ? api_keys.Tenant(api_keys.Match(authorization)) : 0;
}

absl::StatusOr<PreparedRequest> FrontDoor::Prepare(ServeRequest& r, std::string_view authorization,
                                                   const Tokenizer& tokenizer) const {
  r.tenant = TenantOf(authorization);
  absl::StatusOr<PreparedRequest> prepared = PrepareRequest(r, tokenizer, limits);
  if (!prepared.ok()) Refused(prepared.status(), r.request_id);
  return prepared;
}

void FrontDoor::Refused(const absl::Status& s, std::string_view request_id) const {
  if (on_rejected) on_rejected(s);
  logging::Request(logging::Level::kInfo, request_id, "refused: %s", s.ToString());
}

}  // namespace beacon
