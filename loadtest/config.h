// One beacon-loadtest run or sweep, as a typed config, and the checks that
// need the server's ModelInfo. The command line becomes a Config in
// cli/loadtest/flags.h (flags are parsed at the edge, never here).
#ifndef BEACON_LOADTEST_CONFIG_H_
#define BEACON_LOADTEST_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

// Checks the configuration against the server: every KV policy of the mix is
// allowed, budgets are within its range, a fixed prompt length fits the
// context; fits the synthetic token-id range to the vocabulary.
absl::Status ApplyModelInfo(const v1::ModelInfo& info, Config* config);

// With --reference-output-len: every entry's max_tokens becomes its reference
// answer's token count, by the server's tokenizer. Blocking; errors name the entry.
absl::Status ApplyReferenceLengths(StreamClient* client, Config* config);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_CONFIG_H_
