// beacon-eval revisit: does a compressed cache keep the facts the model's
// own text keeps coming back to? (issue 32, docs/fidelity.md "The revisit
// test (1.5B)"). Each case (eval/revisit_cases.h) states several facts at
// the start of the assistant's text, a long stretch revisits some of them,
// then the text asks for one revisited and one never-revisited fact.
//
// Every configuration (the full cache first, then each (policy, budget))
// runs in one ragged batch, teacher-forced over the same tokens, through
// the serving step executor (eval/replay_batch.h: each configuration is a
// Generation whose tokens are forced to the case's): the prompt prefilled
// in chunks, then one decode step per token, stretch and questions alike,
// each compressor evicting after the prompt and after every step exactly
// as a served sequence's does. (Until 2026-12-05 the stretch was fed in
// multi-token chunks between eviction points, --chunk 16, as the recorded
// results in eval/results/revisit-1.5b/ were; on a check run (default
// model, 2 cases, 5 policies x 2 budgets) --chunk 16, --chunk 1 and this
// path gave identical results, timings aside.)
//
// Per configuration and asked fact: the answer's log-probability (sum over
// its tokens, teacher-forced), exact match (every answer token is the
// argmax given the ones before it and the argmax after the last one does not
// continue the number: the greedy continuation states the answer, since
// the tokenizer splits digits), and, in the cache that computes the first
// answer token (before that step's eviction), the share of (layer, KV head)
// pairs that still hold every position of the fact's value in its statement
// (and, graded, the mean share of those positions a pair holds).
#ifndef BEACON_EVAL_REVISIT_H_
#define BEACON_EVAL_REVISIT_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime.h"
#include "eval/revisit_cases.h"

namespace beacon::eval {

struct RevisitOptions {
  std::vector<std::string> policies;  // compressing (MakePolicyGrid); the full cache always runs
  std::vector<int32_t> budgets = {64, 128};
  int32_t interval = 16;
  int32_t cases = 10;  // ids 0 .. cases - 1
  uint64_t seed = 1;
  RevisitShape shape;
  int32_t prefill_chunk = 512;
};

// INVALID_ARGUMENT naming the bad field (the grid, cases, shape).
absl::Status ValidateRevisitOptions(const RevisitOptions& options);

// One configuration's answer to one asked fact.
struct RevisitAnswer {
  int32_t fact = -1;
  bool revisited = false;
  double logprob = 0;      // sum over the answer's tokens
  bool exact = false;      // the greedy continuation states the value
  std::string greedy;      // the argmax tokens over the answer and the one after, decoded
  double pairs_held = 0;   // share of (layer, KV head) pairs holding every value position
  double digits_held = 0;  // mean over the pairs of the share of value positions held
};

struct RevisitRow {
  std::string policy;                  // "full" for the full cache
  int32_t budget = 0;                  // 0 for the full cache
  std::vector<RevisitAnswer> answers;  // in the order asked
  // At the first question: pairs_held averaged over every revisited fact and
  // over every never-revisited one (not only the asked ones).
  double held_revisited = 0, held_plain = 0;
  double digits_revisited = 0, digits_plain = 0;  // likewise digits_held
  int64_t evictions = 0;
  int32_t peak_slots = 0;  // per head, prompt included
};

struct RevisitCaseResult {
  int32_t id = 0;
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;  // teacher-forced after the prompt
  // Tokens between the end of the last statement and the first cue.
  int32_t stretch_tokens = 0;
  std::vector<std::string> values;  // per fact
  std::vector<bool> revisited;      // per fact
  double seconds = 0;
  std::vector<RevisitRow> rows;  // the full cache first, then the grid's order
};

// Runs every case, calling on_case after each; progress lines go to `log`.
// INVALID_ARGUMENT for bad options (before any model work);
// FAILED_PRECONDITION without a tokenizer or when a case's tokens do not
// hold the structure the metrics need (a value without digit tokens);
// backend errors as they come.
absl::Status RunRevisitEval(Runtime* rt, const RevisitOptions& options, std::FILE* log,
                            const std::function<void(const RevisitCaseResult&)>& on_case);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REVISIT_H_
