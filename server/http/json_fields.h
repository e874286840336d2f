// Small readers of request-body fields shared by the HTTP endpoints
// (openai_request.cc, openai_fields.cc, tokenize_routes.cc): errors are
// INVALID_ARGUMENT "<field>: <what>", the shape FieldOf (serve_request.h)
// reads back as the field.
#ifndef BEACON_SERVER_HTTP_JSON_FIELDS_H_
#define BEACON_SERVER_HTTP_JSON_FIELDS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace beacon {

inline absl::Status FieldError(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Absent or null leaves `out` unchanged; anything but a boolean is refused.
inline absl::Status GetJsonBool(const nlohmann::json& j, const char* field, bool* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return FieldError(field, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace beacon

#endif  // BEACON_SERVER_HTTP_JSON_FIELDS_H_
