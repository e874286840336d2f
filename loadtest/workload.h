// What each load-test request asks for: its input (synthetic token ids of an
// exact length, or a prompt from a JSONL file), its output length, and its
// KV policy and budget, drawn from a weighted mix.
//
// A Workload is a deterministic sequence: the same options and seed give the
// same requests in the same order, whatever the arrival process, so an open
// loop run, a closed loop run and every level of a sweep send the same work.
#ifndef BEACON_LOADTEST_WORKLOAD_H_
#define BEACON_LOADTEST_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "workload/length_dist.h"

namespace beacon::loadtest {

// Prompt and output length distributions: workload/length_dist.h.
using workload::LengthDist;

// One entry of a KV mix: the policy a request names (or "default": send no
// KV options, so the server's default applies), its budget (0: the policy's
// default) and its relative weight.
struct KvChoice {
  std::string policy = "default";
  int32_t budget = 0;
  int32_t weight = 1;
  // "beacon@256", "full", "default".
  std::string Label() const;
};

// Parses `POLICY[@BUDGET][:WEIGHT],...`, e.g. "full:1,beacon@256:3" or
// "full,beacon". Errors name `flag` and the bad entry.
absl::StatusOr<std::vector<KvChoice>> ParseKvMix(absl::string_view spec, absl::string_view flag = "--kv-mix");

// One line of a prompts file: {"prompt": "..."} is sent as raw text (no chat
// template), {"messages": [{"role": ..., "content": ...}, ...]} as chat;
// "max_tokens" (optional) overrides --output-len for that request.
struct PromptEntry {
  std::string text;
  std::vector<std::pair<std::string, std::string>> chat;  // (role, content)
  int32_t max_tokens = 0;
  std::string reference;  // a dataset's reference answer (ShareGPT), for --reference-output-len
};

// Reads a JSONL prompts file. Blank lines are skipped; a bad line is an
// INVALID_ARGUMENT naming "path:line"; an unreadable or empty file is an error
// naming the path.
absl::StatusOr<std::vector<PromptEntry>> LoadPromptsJsonl(const std::string& path);

struct WorkloadOptions {
  LengthDist prompt_len = LengthDist::Fixed(128);  // synthetic prompts
  LengthDist output_len = LengthDist::Fixed(128);  // max_tokens when the entry gives none
  bool ignore_eos = false;                         // generate exactly max_tokens (reasoning-style)
  std::vector<PromptEntry> prompts;                // when non-empty, used in order, cycling
  std::vector<KvChoice> kv_mix = {KvChoice{}};     // smooth weighted round-robin
  float temperature = 0;                           // 0 = greedy
  int32_t token_min = 1000, token_max = 40000;     // synthetic ids drawn from [min, max)
  uint64_t seed = 0;
};

// One request, ready to send. Exactly one of tokens / text / chat is set.
struct RequestSpec {
  int64_t index = 0;
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<std::pair<std::string, std::string>> chat;
  int32_t max_tokens = 0;
  bool ignore_eos = false;
  float temperature = 0;
  uint64_t seed = 0;  // the sampling seed (matters when temperature > 0)
  KvChoice kv;
};

class Workload {
 public:
  // REQUIRES: kv_mix non-empty with positive weights, token_min < token_max.
  explicit Workload(WorkloadOptions options);

  // The next request (index 0, 1, ...).
  RequestSpec Next();

  const WorkloadOptions& options() const { return options_; }

 private:
  const KvChoice& NextKv();

  WorkloadOptions options_;
  std::mt19937_64 rng_;
  int64_t next_index_ = 0;
  std::vector<int64_t> kv_credit_;  // smooth weighted round-robin state
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_WORKLOAD_H_
