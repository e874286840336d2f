// `beacon-bench grammar`: what structured output costs a decode step. The
// same batch of sequences decodes the same number of steps through the
// StepExecutor serving runs, once free and once with a JSON schema on every
// sequence (its masks filled each step on the engine's CPU pool, applied in
// the sampler), in alternating rounds; the ratio of the two throughputs is
// the overhead (issue 48's target: at most 5% at batch 16). Also the compile
// time of the schema, cold and from the cache.
#ifndef BEACON_BENCH_GRAMMAR_BENCH_H_
#define BEACON_BENCH_GRAMMAR_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"

namespace beacon {

// An array of at least 1000 objects of a name, an integer and a list of
// enums: long enough never to complete within the timed steps, and it walks
// strings, numbers, keys and enums as real JSON output does.
extern const char kGrammarBenchSchema[];

struct GrammarBenchResult {
  int32_t batch = 0;
  int32_t steps = 0;
  std::vector<double> free_tokens_per_s;     // one per round
  std::vector<double> grammar_tokens_per_s;  // one per round, alternating with the free ones
  double compile_cold_ms = 0;
  double compile_cached_ms = 0;
  double Median(const std::vector<double>& v) const;
  // grammar / free, of the medians.
  double ratio() const { return Median(grammar_tokens_per_s) / Median(free_tokens_per_s); }
};

// `batch` sequences of one chat prompt, prefilled, then `steps` timed decode
// steps per round, `rounds` rounds of each kind.
absl::StatusOr<GrammarBenchResult> BenchGrammar(Runtime* rt, int32_t batch, int32_t steps, int32_t rounds,
                                                const std::string& schema);

}  // namespace beacon

#endif  // BEACON_BENCH_GRAMMAR_BENCH_H_
