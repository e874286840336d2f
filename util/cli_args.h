// A small command-line parser for the beacon-* tools, with every option
// declared up front so that an unknown or malformed option is a clear error,
// never ignored. The conventions it enforces are docs/development.md's
// "Command-line conventions":
//   --name VALUE, --name=VALUE   an option with a value (a list is comma-separated)
//   --name, --no-name            a switch; --name=true|false in scripts (on/off
//                                and 1/0 are accepted as the value too)
//   --help, -h                   help() is set; the program prints Help(), exit 0
//   --                           everything after it is positional
// A renamed option is declared with Refuse(): giving it is an error that names
// the new spelling, on the command line and in the environment alike.
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
#include "absl/strings/string_view.h"

namespace beacon::cli {

// true/false, and the synonyms on/off and 1/0; INVALID_ARGUMENT otherwise.
inline absl::StatusOr<bool> ParseBool(absl::string_view v) {
  if (v == "true" || v == "on" || v == "1") return true;
  if (v == "false" || v == "off" || v == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
}

class Args {
 public:
  Args() { Declare("help", true, "", "show this help and exit"); }

  // Declares an option; `is_switch` options are booleans ("true"/"false", or
  // "" = unset, which Flag() reads as false) and take no separate value.
  // `help` is printed by Usage().
  void Declare(const std::string& name, bool is_switch, const std::string& def, const std::string& help) {
    specs_[name] = Spec{is_switch, def, help};
  }
  // An old spelling that users may still script: giving it fails with `hint`,
  // which should name the new spelling ("--budgets was renamed --kv-budget").
  void Refuse(const std::string& old_name, const std::string& hint) { refused_[old_name] = hint; }

  // Parses argv[first..]. Positional arguments are collected in order.
  absl::Status Parse(int argc, char** argv, int first = 1) {
    for (int i = first; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--") {
        for (++i; i < argc; ++i) positional_.push_back(argv[i]);
        break;
      }
      if (a == "-h") {
        values_["help"] = {"true"};
        continue;
      }
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
      if (auto r = refused_.find(name); r != refused_.end()) return absl::InvalidArgumentError(r->second);
      auto it = specs_.find(name);
      if (it == specs_.end() && !has_value && name.rfind("no-", 0) == 0) {
        auto neg = specs_.find(name.substr(3));
        if (neg != specs_.end() && neg->second.is_switch && neg->first != "help") {
          values_[neg->first].push_back("false");
          continue;
        }
      }
      if (it == specs_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
      if (it->second.is_switch) {
        if (!has_value) {
          if (i + 1 < argc && IsBoolWord(argv[i + 1])) {
            return absl::InvalidArgumentError(absl::StrCat("--", name, " is a switch: write --", name, "=", argv[i + 1],
                                                           " (or --", name, " / --no-", name, "), not --", name, " ",
                                                           argv[i + 1]));
          }
          values_[name].push_back("true");
          continue;
        }
        absl::StatusOr<bool> b = ParseBool(value);
        if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", b.status().message()));
        values_[name].push_back(*b ? "true" : "false");
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
  // --kv-policy from BEACON_KV_POLICY. The command line wins. A switch's
  // variable holds true/false (or on/off, 1/0); a refused option's variable
  // is the same error as the option.
  absl::Status LoadEnvironment(const std::string& prefix) {
    for (const auto& [name, hint] : refused_) {
      const std::string var = EnvName(prefix, name);
      if (const char* v = std::getenv(var.c_str()); v != nullptr && *v != '\0') {
        return absl::InvalidArgumentError(absl::StrCat(var, ": ", hint));
      }
    }
    for (const auto& [name, spec] : specs_) {
      if (values_.count(name) > 0 || name == "help") continue;
      const std::string var = EnvName(prefix, name);
      const char* v = std::getenv(var.c_str());
      if (v == nullptr || *v == '\0') continue;
      if (!spec.is_switch) {
        values_[name].push_back(v);
        continue;
      }
      absl::StatusOr<bool> b = ParseBool(v);
      if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat(var, ": ", b.status().message()));
      values_[name].push_back(*b ? "true" : "false");
    }
    return absl::OkStatus();
  }

  bool help() const { return Flag("help"); }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Str(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() ? it->second.back() : specs_.at(name).def;
  }
  std::vector<std::string> All(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() ? it->second : std::vector<std::string>{};
  }
  // A switch's value (false when unset and its default is "").
  bool Flag(const std::string& name) const {
    absl::StatusOr<bool> b = ParseBool(Str(name));
    return b.ok() && *b;
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
  // A comma-separated list of integers >= 1 (sizes, budgets: --batches
  // 1,4,16); at least one. INVALID_ARGUMENT names the option and the value.
  absl::StatusOr<std::vector<int32_t>> PositiveIntList(const std::string& name) const {
    std::vector<int32_t> out;
    for (absl::string_view p : absl::StrSplit(Str(name), ',', absl::SkipEmpty())) {
      int32_t v;
      if (!absl::SimpleAtoi(p, &v) || v < 1) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", p, "' is not a positive integer"));
      }
      out.push_back(v);
    }
    if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": empty"));
    return out;
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

  // One entry per option, in name order: the spelling ("--name, --no-name"
  // for a switch), then the help and the default (none shown for "": unset).
  std::string Usage() const {
    std::string out;
    for (const auto& [name, spec] : specs_) {
      std::string def = spec.def;
      if (spec.is_switch && !def.empty()) def = ParseBool(def).value_or(false) ? "true" : "false";
      const std::string spelling = name == "help"   ? "--help, -h"
                                   : spec.is_switch ? absl::StrCat("--", name, ", --no-", name)
                                                    : absl::StrCat("--", name, " VALUE");
      absl::StrAppend(&out, "  ", spelling, "\n      ", spec.help,
                      def.empty() || name == "help" ? "" : absl::StrCat(" (default: ", def, ")"), "\n");
    }
    return out;
  }
  // `synopsis` ("usage: beacon-run --model PATH --prompt TEXT [options]"),
  // then the options.
  std::string Help(const std::string& synopsis) const { return absl::StrCat(synopsis, "\n\noptions:\n", Usage()); }

 private:
  struct Spec {
    bool is_switch;
    std::string def;
    std::string help;
  };
  // Words that would be a switch's value in the refused `--name VALUE` form.
  static bool IsBoolWord(absl::string_view v) { return v == "true" || v == "false" || v == "on" || v == "off"; }
  static std::string EnvName(const std::string& prefix, const std::string& name) {
    std::string var = prefix;
    for (char c : name) var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return var;
  }

  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> refused_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// A subcommand of a program (beacon-eval model, beacon-gguf crc, ...).
struct Command {
  std::string name;
  std::string summary;
};

// The help of a program with subcommands: `PROG --help` prints it to stdout
// (exit 0), a missing or unknown command to stderr (exit 2).
inline std::string CommandsHelp(const std::string& program, const std::vector<Command>& commands,
                                const std::string& tail = "") {
  std::string out = absl::StrCat("usage: ", program, " COMMAND [options]\n\ncommands:\n");
  for (const Command& c : commands)
    absl::StrAppend(&out, "  ", c.name, std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' '), c.summary, "\n");
  absl::StrAppend(&out, "\n`", program, " COMMAND --help` lists a command's options.\n", tail);
  return out;
}

inline bool IsHelpArg(absl::string_view a) { return a == "--help" || a == "-h"; }

}  // namespace beacon::cli

#endif  // BEACON_UTIL_CLI_ARGS_H_
