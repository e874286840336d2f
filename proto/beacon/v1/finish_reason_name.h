// The user-facing name of a FinishReason: the enum name without its
// FINISH_REASON_ prefix, in lower case ("length", "eos", "stop_sequence";
// "unspecified" for the default). Header-only so every client of the generated
// code (beacon-client, beacon-loadtest) can use it with just beacon_proto.
#ifndef BEACON_PROTO_BEACON_V1_FINISH_REASON_NAME_H_
#define BEACON_PROTO_BEACON_V1_FINISH_REASON_NAME_H_

#include <cctype>
#include <string>

#include "proto/beacon/v1/beacon.pb.h"

namespace beacon::v1 {

inline std::string FinishReasonName(FinishReason r) {
  std::string n = FinishReason_Name(r);
  constexpr char kPrefix[] = "FINISH_REASON_";
  if (n.rfind(kPrefix, 0) == 0) n = n.substr(sizeof(kPrefix) - 1);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

}  // namespace beacon::v1

#endif  // BEACON_PROTO_BEACON_V1_FINISH_REASON_NAME_H_
