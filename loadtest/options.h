// beacon-loadtest's command line: every option, its validation, and the
// checks that need the server's ModelInfo. Bad arguments are INVALID_ARGUMENT
// (or NOT_FOUND for an unreadable file) naming the option, never ignored.
#ifndef BEACON_LOADTEST_OPTIONS_H_
#define BEACON_LOADTEST_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/client.h"
#include "loadtest/runner.h"
#include "loadtest/stats.h"
#include "loadtest/workload.h"
#include "proto/beacon/v1/beacon.pb.h"

namespace beacon::loadtest {

struct Config {
  bool sweep = false;                   // `beacon-loadtest sweep`
  bool plot_only = false;               // `beacon-loadtest plot`: re-plot saved sweep JSON, no server
  std::vector<std::string> plot_from;   // plot: sweep JSON files
  std::vector<std::string> plot_names;  // plot: series names (default: each sweep's label or KV policy)
  bool help = false;
  ClientOptions client;
  WorkloadOptions workload;
  LoadOptions load;  // a run; for a sweep, every level's template
  Slo slo;           // empty when --slo is not given
  // Sweep: the load levels, ascending; rates (open loop) or concurrencies.
  std::vector<double> levels;
  bool by_concurrency = false;
  int32_t waves = 0;             // > 0: a closed-loop sweep runs waves x concurrency requests per level
  double slo_attainment = 0.9;   // a level passes when this share of its requests meets the SLO
  int32_t stop_after_fails = 1;  // stop after this many failing levels in a row
  std::string json_path, csv_path, plot_path;
  std::string json_format = "beacon";  // or "vllm": benchmark_serving's result shape (vllm_result.h)
  std::string dataset;                 // "sharegpt", "custom", "jsonl"; "" for synthetic prompts
  bool reference_output_len = false;   // sharegpt: max_tokens from the reference answers (ApplyReferenceLengths)
  std::string label;                   // free text recorded in the JSON
  std::string command_line;            // for the JSON
};

// Parses argv (argv[1] may be the command: `run`, the default, `sweep`, or
// `plot`).
absl::StatusOr<Config> ParseConfig(int argc, char** argv);

// Checks the configuration against the server: every KV policy of the mix is
// allowed, budgets are within its range, a fixed prompt length fits the
// context; fits the synthetic token-id range to the vocabulary.
absl::Status ApplyModelInfo(const v1::ModelInfo& info, Config* config);

// With --reference-output-len: every entry's max_tokens becomes its reference
// answer's token count, by the server's tokenizer. Blocking; errors name the entry.
absl::Status ApplyReferenceLengths(StreamClient* client, Config* config);

// A sweep's level list: "1,2,4,8", or a range START:STOP:+STEP (additive) or
// START:STOP:xFACTOR (geometric), e.g. "1:64:x2". Levels are > 0, ascending
// and distinct; integers when `integer`. Errors name `flag`.
absl::StatusOr<std::vector<double>> ParseLevels(absl::string_view spec, bool integer, absl::string_view flag);

// The --help text (usage_text.cc).
std::string UsageText();

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_OPTIONS_H_
