// Which fields the OpenAI-compatible endpoints take. Every request field is
// honoured or refused, never silently ignored: a client must not believe it
// got something it did not. Fields of OpenAI's schemas whose features this
// server lacks (audio, predicted outputs, stored completions...) are accepted
// only at the value that asks for nothing, and otherwise refused by name
// with the reason; a field no schema has is refused as unrecognised, as
// OpenAI's own API does. The field list is the one place to add a field:
// tests/server/openai/openai_fields_test.cc walks it.
#ifndef BEACON_SERVER_OPENAI_OPENAI_FIELDS_H_
#define BEACON_SERVER_OPENAI_OPENAI_FIELDS_H_

#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace beacon {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiField {
  const char* name;
  enum Where { kBoth, kCompletions, kChat } where;
  // Accepted only at a do-nothing value (the feature is not implemented).
  bool refused_when_used = false;
};

// Every field either endpoint knows, honoured or refused-when-used.
std::span<const OpenAiField> OpenAiFields();

// INVALID_ARGUMENT naming the first field that is unknown, of the other
// endpoint, or asks for a feature this server does not implement.
absl::Status CheckOpenAiFields(const nlohmann::json& body, OpenAiEndpoint endpoint);

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_OPENAI_FIELDS_H_
