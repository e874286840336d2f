// A small command-line parser for the beacon-* tools: `--name value`,
// `--name=value` and boolean `--name`, with every option declared up front so
// an unknown or malformed option is a clear error, never ignored.
#ifndef BEACON_UTIL_CLI_ARGS_H_
#define BEACON_UTIL_CLI_ARGS_H_

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace beacon::cli {

class Args {
 public:
  // Declares an option; `is_flag` options take no value. `help` is printed
  // by Usage().
  void Declare(const std::string& name, bool is_flag, const std::string& def, const std::string& help) {
    specs_[name] = Spec{is_flag, def, help};
  }

  // Parses argv[first..]. Positional arguments are collected in order.
  absl::Status Parse(int argc, char** argv, int first = 1) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) {
        positional_.push_back(a);
        continue;
      }
      std::string name = a.substr(2), value;
      bool has_value = false;
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      auto it = specs_.find(name);
      if (it == specs_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
      if (it->second.is_flag) {
        values_[name].push_back(has_value ? value : "true");
        continue;
      }
      if (!has_value) {
        if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("option --", name, " needs a value"));
        value = argv[++i];
      }
      values_[name].push_back(value);
    }
    return absl::OkStatus();
  }

  // Every declared option not given on the command line is taken from the
  // environment variable `prefix` + NAME (upper case, '-' -> '_'), e.g.
  // --kv-policy from BEACON_KV_POLICY. The command line wins.
  void ApplyEnvironment(const std::string& prefix) {
    for (const auto& [name, spec] : specs_) {
      if (values_.count(name) > 0) continue;
      std::string var = prefix;
      for (char c : name) var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (const char* v = std::getenv(var.c_str()); v != nullptr && *v != '\0') values_[name].push_back(v);
    }
  }

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Str(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() ? it->second.back() : specs_.at(name).def;
  }
  std::vector<std::string> All(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() ? it->second : std::vector<std::string>{};
  }
  bool Flag(const std::string& name) const {
    const std::string v = Str(name);
    return v == "true" || v == "1";
  }
  absl::StatusOr<int64_t> Int(const std::string& name) const {
    int64_t v;
    if (!absl::SimpleAtoi(Str(name), &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " expects an integer, got '", Str(name), "'"));
    }
    return v;
  }
  absl::StatusOr<double> Double(const std::string& name) const {
    double v;
    if (!absl::SimpleAtod(Str(name), &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " expects a number, got '", Str(name), "'"));
    }
    return v;
  }
  // A comma-separated list of integers (e.g. token ids); empty when unset.
  absl::StatusOr<std::vector<int32_t>> IntList(const std::string& name) const {
    std::vector<int32_t> out;
    for (absl::string_view p : absl::StrSplit(Str(name), ',', absl::SkipEmpty())) {
      int32_t v;
      if (!absl::SimpleAtoi(p, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, ": bad id '", p, "' (expected comma-separated integers)"));
      }
      out.push_back(v);
    }
    return out;
  }
  const std::vector<std::string>& positional() const { return positional_; }

  std::string Usage() const {
    std::string out;
    for (const auto& [name, spec] : specs_) {
      absl::StrAppend(&out, "  --", name, spec.is_flag ? "" : " VALUE", "\n      ", spec.help,
                      spec.def.empty() ? "" : absl::StrCat(" (default: ", spec.def, ")"), "\n");
    }
    return out;
  }

 private:
  struct Spec {
    bool is_flag;
    std::string def;
    std::string help;
  };
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace beacon::cli

#endif  // BEACON_UTIL_CLI_ARGS_H_
