// beacon-loadtest's command line from a list of arguments, for the tests that
// need a Config made by the real parser (cli/loadtest/flags.h).
#ifndef BEACON_TESTS_CLI_LOADTEST_PARSE_ARGS_H_
#define BEACON_TESTS_CLI_LOADTEST_PARSE_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/loadtest/flags.h"

namespace beacon::loadtest::testing {

// ParseConfig over "beacon-loadtest" followed by `args`.
inline absl::StatusOr<Config> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "beacon-loadtest");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseConfig(static_cast<int>(argv.size()), argv.data());
}

}  // namespace beacon::loadtest::testing

#endif  // BEACON_TESTS_CLI_LOADTEST_PARSE_ARGS_H_
