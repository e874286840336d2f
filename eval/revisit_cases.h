// The cases of `beacon-eval revisit` (docs/fidelity.md "The revisit test
// (1.5B)"): text only, no model. A case is a pure function of (seed, id,
// shape), so tests can check it alone.
//
// The user turn asks the assistant to invent a four-digit code for each of
// several vaults, count crates shelf by shelf, and answer for some codes at
// the end. It holds no code: keep_prompt protects the prompt, so a fact
// stated there could never be evicted. The assistant's text, teacher-forced
// (eval/revisit.h), is the sequence of segments:
//
//   statements  "The code of the red vault is" " 4817" ".\n"  (one per fact;
//               the value is its own kValue segment)
//   stretch     `steps` counting steps (kText) with the revisits (kRevisit)
//               spread evenly among them: each revisited fact is named
//               `revisits_per_fact` times, round robin over the revisited
//               facts. A revisit names the vault and refers back to its
//               code without restating a digit of it, so the statement
//               stays the answer's only copy in the context: what is
//               measured is whether that copy survives, not whether a
//               recent restatement does.
//   questions   for each asked fact, a cue "The code of the red vault is"
//               (kCue) and the expected answer " 4817" (kAnswer); one
//               revisited and one never-revisited fact, revisited first on
//               even ids, so the order is balanced.
#ifndef BEACON_EVAL_REVISIT_CASES_H_
#define BEACON_EVAL_REVISIT_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace beacon::eval {

// The shape of every case of a run.
struct RevisitShape {
  int32_t facts = 6;              // vault codes stated at the start (<= 10 colours)
  int32_t revisited = 3;          // of them, named again in the stretch (1 .. facts - 1)
  int32_t revisits_per_fact = 3;  // mentions of each revisited fact
  int32_t steps = 14;             // counting steps in the stretch (>= 1)
};

// INVALID_ARGUMENT naming the field out of range.
absl::Status ValidateRevisitShape(const RevisitShape& shape);

enum class RevisitRole {
  kText,     // plan, counting steps, transitions
  kValue,    // a fact's value in its statement: the answer's positions
  kRevisit,  // a sentence naming a revisited fact
  kCue,      // "The code of the <subject> is", before an answer
  kAnswer,   // the expected answer, " <value>"
};

struct RevisitSegment {
  RevisitRole role = RevisitRole::kText;
  int32_t fact = -1;  // kValue, kRevisit, kCue, kAnswer: the fact's index
  std::string text;
};

struct RevisitFact {
  std::string subject;  // "red vault"
  std::string value;    // four digits, no leading zero; distinct within a case
  bool revisited = false;
};

struct RevisitCase {
  int32_t id = 0;
  std::string prompt;  // the user turn, before the chat template; holds no value
  std::vector<RevisitFact> facts;
  // The asked facts, in the order asked: {revisited, plain} on even ids,
  // {plain, revisited} on odd ones.
  std::vector<int32_t> asked;
  std::vector<RevisitSegment> segments;  // the assistant's text, in order
};

// Case `id` under `seed`: the same on every platform (util/splitmix.h
// draws, no standard-library distributions). REQUIRES a valid shape, id >= 0.
RevisitCase MakeRevisitCase(uint64_t seed, int32_t id, const RevisitShape& shape);

// The counting step (1-based) after which mention k of n (0-based) comes:
// floor((k + 1) * steps / (n + 1)) clamped to [1, steps], so the mentions
// spread evenly over the stretch, none before its first step.
int32_t AfterStep(int32_t k, int32_t n, int32_t steps);

// The assistant's whole text (the segments concatenated).
std::string RevisitText(const RevisitCase& c);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REVISIT_CASES_H_
