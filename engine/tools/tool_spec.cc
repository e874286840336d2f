#include "engine/tools/tool_spec.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "util/utf8.h"

namespace beacon {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::Status ToolRequest::Validate(const ToolLimits& limits) const {
  if (static_cast<int64_t>(tools.size()) > limits.max_tools) {
    return Invalid("tools", absl::StrCat("has ", tools.size(), " tools; at most ", limits.max_tools));
  }
  absl::flat_hash_set<std::string> names;
  int64_t total = 0;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& t = tools[i];
    const std::string f = absl::StrCat("tools[", i, "].function");
    if (!ValidName(t.name)) {
      return Invalid(f + ".name", "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
    }
    if (!names.insert(t.name).second) return Invalid(f + ".name", absl::StrCat("'", t.name, "' is given twice"));
    if (static_cast<int64_t>(t.description.size()) > limits.max_description_bytes) {
      return Invalid(f + ".description",
                     absl::StrCat("is ", t.description.size(), " bytes; at most ", limits.max_description_bytes));
    }
    if (!IsValidUtf8(t.description)) return Invalid(f + ".description", "is not valid UTF-8");
    if (static_cast<int64_t>(t.parameters.size()) > limits.max_parameters_bytes) {
      return Invalid(f + ".parameters",
                     absl::StrCat("is ", t.parameters.size(), " bytes; at most ", limits.max_parameters_bytes));
    }
    const nlohmann::json p = nlohmann::json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
    if (!p.is_object()) return Invalid(f + ".parameters", "must be a JSON schema object");
    total += static_cast<int64_t>(t.name.size() + t.description.size() + t.parameters.size());
  }
  if (total > limits.max_total_bytes) {
    return Invalid("tools", absl::StrCat("are ", total, " bytes together; at most ", limits.max_total_bytes));
  }
  const bool need_tools = choice.mode == ToolChoice::Mode::kRequired || choice.mode == ToolChoice::Mode::kNamed;
  if (need_tools && tools.empty()) return Invalid("tool_choice", "needs tools to choose from");
  if (choice.mode == ToolChoice::Mode::kNamed && !names.contains(choice.name)) {
    return Invalid("tool_choice", absl::StrCat("names '", Excerpt(choice.name), "', which is not among the tools"));
  }
  return absl::OkStatus();
}

}  // namespace beacon
