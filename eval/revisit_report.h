// The summary of `beacon-eval revisit` (eval/revisit.h): per configuration,
// means over cases for each kind of asked fact (revisited, never revisited),
// written as markdown and JSON. The full cache's row is the reference: a
// fact it gets wrong is one the model cannot recall at all, not one that
// eviction lost.
#ifndef BEACON_EVAL_REVISIT_REPORT_H_
#define BEACON_EVAL_REVISIT_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime.h"
#include "eval/revisit.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {

// One kind of asked fact under one configuration, over the cases.
struct RevisitKindStats {
  int32_t n = 0;
  double exact = 0;        // share of cases answered exactly
  double logprob = 0;      // mean answer log-probability (nats, summed over the answer's tokens)
  double pairs_held = 0;   // mean share of (layer, KV head) pairs holding the asked value's positions
  double digits_held = 0;  // mean share of the asked value's positions a pair holds
  // Among the cases the full cache answers exactly: their count and this
  // configuration's share of them answered exactly.
  int32_t n_full_right = 0;
  double exact_where_full_right = 0;
};

struct RevisitCell {
  std::string policy;
  int32_t budget = 0;
  RevisitKindStats revisited, plain;
  double held_revisited = 0, held_plain = 0;  // means of RevisitRow's, over the cases
  double digits_revisited = 0, digits_plain = 0;
  double evictions = 0;       // mean per case
  double peak_generated = 0;  // mean peak slots per head past the prompt
};

// One cell per configuration, in the rows' order (the full cache first).
// REQUIRES every result to have the same configurations in the same order.
std::vector<RevisitCell> SummarizeRevisit(const std::vector<RevisitCaseResult>& results);

// The tables, under `heading`.
std::string RevisitMarkdown(const std::vector<RevisitCell>& cells, const std::vector<RevisitCaseResult>& results,
                            const std::string& heading);

// {"cells": [...], "cases": [...]} with every per-case row.
nlohmann::json RevisitJson(const std::vector<RevisitCell>& cells, const std::vector<RevisitCaseResult>& results);

// The whole command: RunRevisitEval on `rt`, writing DIR/revisit.md and
// DIR/revisit.json (the settings, `model` and `command` included) after
// every case, so a run stopped early leaves a consistent partial result
// labelled as such. REQUIRES dir exists. Errors: RunRevisitEval's, or
// INTERNAL naming the file that could not be written.
absl::Status RunRevisitToFiles(Runtime* rt, const RevisitOptions& options, const std::string& model,
                               const std::string& command, const std::string& dir, std::FILE* log);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REVISIT_REPORT_H_
