// `beacon-bench prefill`: prompt processing throughput on a real model. One
// sequence's prompt of N tokens runs through the backend in chunks, as the
// scheduler feeds a long prompt (SchedulerConfig::prefill_chunk tokens per
// step, the last token's logits each step); the wall time of the whole
// prompt gives tokens/s. tools/llamacpp_bench.py --prefill measures
// llama.cpp on the same token ids.
#ifndef BEACON_BENCH_PREFILL_BENCH_H_
#define BEACON_BENCH_PREFILL_BENCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"

namespace beacon {

// Token i of a benchmark prompt: (i * 31 + 7) % vocab_size, the same formula
// as tools/llamacpp_bench.py's prefill prompt (the cost does not depend on
// the ids; the same ids keep the two runs comparable all the same).
std::vector<int32_t> PrefillBenchPrompt(int32_t n_tokens, int32_t vocab_size);

struct PrefillBenchResult {
  int32_t prompt_len = 0;
  int32_t chunk = 0;
  int32_t steps = 0;   // forward passes per prompt
  double seconds = 0;  // best of the repeats
  double tokens_per_second() const { return prompt_len / seconds; }
};

// Prefills a fresh sequence with PrefillBenchPrompt(prompt_len) in chunks of
// `chunk` tokens, `repeats` times (a short untimed prefill first warms the
// threads), and reports the fastest. REQUIRES prompt_len, chunk, repeats >= 1.
absl::StatusOr<PrefillBenchResult> BenchPrefill(Runtime* rt, int32_t prompt_len, int32_t chunk, int repeats);

}  // namespace beacon

#endif  // BEACON_BENCH_PREFILL_BENCH_H_
