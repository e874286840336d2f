// The cases of `beacon-eval needle` (docs/fidelity.md "Needle: does it keep
// what gets revisited?"): what the model is told early, what it is asked
// late, and how its answer is scored. Text only, no model: a case is a pure
// function of (seed, id), so tests can check it alone.
//
// A case's token stream, as eval/needle.h feeds it:
//
//   prompt   a chat user turn asking for a long story (kept by keep_prompt,
//            so it never holds the answer: the fact must survive eviction)
//   fact     "Note for later: the access code is K7Q2. Now, the story.\n\n"
//   filler   D tokens the model samples itself (eval/needle.h)
//   cue      "\n\nAs noted at the start, the access code is"
//   answer   greedy tokens, scored by AnswerMatches
//
// The fact, the filler and the cue are decode steps, so every policy
// observes and evicts over them exactly as in serving.
#ifndef BEACON_EVAL_NEEDLE_CASES_H_
#define BEACON_EVAL_NEEDLE_CASES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace beacon::eval {

enum class FactKind {
  kName,    // a person's first and last name: "Mara Lindqvist"
  kNumber,  // a four-digit number without a leading zero: "4827"
  kCode,    // letter, digit, letter, digit, no I/O/0/1: "K7Q2"
};

// "name", "number", "code".
std::string_view FactKindName(FactKind kind);

struct NeedleCase {
  int32_t id = 0;
  FactKind kind = FactKind::kName;
  std::string prompt;        // the user turn, before the chat template; never contains `answer`
  std::string fact;          // the passage's first sentence; contains `answer` once
  std::string cue;           // forced after the filler; `answer` is its expected continuation
  std::string answer;        // non-empty, printable ASCII
  uint64_t filler_seed = 0;  // the filler sampler's seed
};

// Case `id` under `seed`. The same (seed, id) gives the same case on every
// platform: the draws use this file's own integer mixing, not the standard
// library's distributions (whose algorithms are implementation-defined).
// Kinds cycle with the id (id % 3: name, number, code) so every kind is
// equally represented in any run; the subject, the value, the prompt's
// topic and the filler seed are drawn. REQUIRES id >= 0.
NeedleCase MakeNeedleCase(uint64_t seed, int32_t id);

// Whether `generated` (the decoded greedy continuation of the cue) states
// `answer`: with leading whitespace removed it starts with `answer` exactly
// (case-sensitive) and the next character, if any, is not an ASCII letter
// or digit, so "48271" does not score for "4827" nor "Mara Lindqvists" for
// "Mara Lindqvist", while "4827." and "K7Q2\n" do. False for an empty answer.
bool AnswerMatches(std::string_view generated, std::string_view answer);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_NEEDLE_CASES_H_
