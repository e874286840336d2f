#include "eval/prompt_set.h"

#include <fstream>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {

absl::StatusOr<std::vector<EvalPrompt>> LoadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the prompt file ", path));
  std::vector<EvalPrompt> out;
  std::set<std::string> ids;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": ", why));
    };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    EvalPrompt p;
    for (auto [field, dest, required] : {std::tuple{"id", &p.id, true}, std::tuple{"prompt", &p.prompt, true},
                                         std::tuple{"system", &p.system, false}}) {
      auto it = j.find(field);
      if (it == j.end()) {
        if (required) return bad(absl::StrCat("missing \"", field, "\""));
        continue;
      }
      if (!it->is_string()) return bad(absl::StrCat("\"", field, "\" must be a string"));
      *dest = it->get<std::string>();
      if (required && dest->empty()) return bad(absl::StrCat("\"", field, "\" is empty"));
    }
    if (!ids.insert(p.id).second) return bad(absl::StrCat("duplicate id '", p.id, "'"));
    out.push_back(std::move(p));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  return out;
}

}  // namespace beacon::eval
