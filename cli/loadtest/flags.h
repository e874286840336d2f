// beacon-loadtest's command line into a loadtest::Config: every option and its
// validation. Bad arguments are INVALID_ARGUMENT (or NOT_FOUND for an
// unreadable file) naming the option, never ignored. The checks that need the
// server (ApplyModelInfo) are the load tester's own: loadtest/config.h.
#ifndef BEACON_CLI_LOADTEST_FLAGS_H_
#define BEACON_CLI_LOADTEST_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/config.h"

namespace beacon::loadtest {

// Parses argv (argv[1] may be the command: `run`, the default, `sweep`, or
// `plot`).
absl::StatusOr<Config> ParseConfig(int argc, char** argv);

// A sweep's level list: "1,2,4,8", or a range START:STOP:+STEP (additive) or
// START:STOP:xFACTOR (geometric), e.g. "1:64:x2". Levels are > 0, ascending
// and distinct; integers when `integer`. Errors name `flag`.
absl::StatusOr<std::vector<double>> ParseLevels(absl::string_view spec, bool integer, absl::string_view flag);

// The --help text (usage.cc).
std::string UsageText();

}  // namespace beacon::loadtest

#endif  // BEACON_CLI_LOADTEST_FLAGS_H_
