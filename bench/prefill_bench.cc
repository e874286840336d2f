#include "bench/prefill_bench.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "kv/store/kv_cache.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

// One prompt through a fresh sequence in chunks; the seconds it took.
absl::StatusOr<double> PrefillOnce(Runtime* rt, KvCache* cache, const std::vector<int32_t>& prompt, int32_t chunk) {
  SequenceKv seq(cache);
  std::vector<float> logits;
  const int32_t n = static_cast<int32_t>(prompt.size());
  const auto t0 = Clock::now();
  for (int32_t done = 0; done < n; done += chunk) {
    const int32_t len = std::min(chunk, n - done);
    ForwardEntry e{&seq, std::span<const int32_t>(prompt).subspan(done, len), done, false};
    if (absl::Status s = rt->backend()->Forward(std::span<const ForwardEntry>(&e, 1), &logits); !s.ok()) return s;
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

std::vector<int32_t> PrefillBenchPrompt(int32_t n_tokens, int32_t vocab_size) {
  std::vector<int32_t> prompt(n_tokens);
  for (int32_t i = 0; i < n_tokens; ++i) prompt[i] = static_cast<int32_t>((int64_t{i} * 31 + 7) % vocab_size);
  return prompt;
}

absl::StatusOr<PrefillBenchResult> BenchPrefill(Runtime* rt, int32_t prompt_len, int32_t chunk, int repeats) {
  if (prompt_len < 1 || chunk < 1 || repeats < 1) {
    return absl::InvalidArgumentError("prefill: prompt length, chunk and repeats must be >= 1");
  }
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(int64_t{prompt_len} + 16);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  const std::vector<int32_t> prompt = PrefillBenchPrompt(prompt_len, rt->config().vocab_size);
  const std::vector<int32_t> warm(prompt.begin(), prompt.begin() + std::min(prompt_len, 64));
  if (absl::StatusOr<double> s = PrefillOnce(rt, cache.get(), warm, chunk); !s.ok()) return s.status();
  PrefillBenchResult r;
  r.prompt_len = prompt_len;
  r.chunk = chunk;
  r.steps = (prompt_len + chunk - 1) / chunk;
  r.seconds = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    absl::StatusOr<double> s = PrefillOnce(rt, cache.get(), prompt, chunk);
    if (!s.ok()) return s.status();
    r.seconds = std::min(r.seconds, *s);
  }
  return r;
}

}  // namespace beacon
