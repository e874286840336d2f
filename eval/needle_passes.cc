#include "eval/needle_passes.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/generation.h"
#include "eval/metrics.h"
#include "eval/replay_batch.h"
#include "kv/policy/eviction_schedule.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon::eval {
namespace {

absl::Status CheckStream(const Runtime& rt, const NeedleStream& s, int32_t distance) {
  if (s.prompt.empty()) return absl::InvalidArgumentError("needle: empty prompt");
  if (s.fact.empty()) return absl::InvalidArgumentError("needle: empty fact sentence");
  if (s.cue.empty()) return absl::InvalidArgumentError("needle: empty cue");
  if (distance < 1) return absl::InvalidArgumentError("needle: distance must be >= 1");
  if (s.answer_tokens < 1) return absl::InvalidArgumentError("needle: answer_tokens must be >= 1");
  if (s.TotalTokens(distance) > rt.config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat("needle: distance ", distance, " makes a case of ",
                                                   s.TotalTokens(distance), " tokens, past the model's context ",
                                                   rt.config().context_length));
  }
  return absl::OkStatus();
}

// Prefills `prompt` into every entry, in chunks; `logits` ends with the
// last prompt token's row of each entry.
absl::Status Prefill(Runtime* rt, std::span<ForwardEntry> entries, const std::vector<int32_t>& prompt, int32_t chunk,
                     std::vector<float>* logits) {
  const int32_t n = static_cast<int32_t>(prompt.size());
  for (int32_t done = 0; done < n;) {
    const int32_t k = std::min(chunk, n - done);
    for (ForwardEntry& e : entries) {
      e.tokens = std::span<const int32_t>(prompt).subspan(done, k);
      e.start_pos = done;
    }
    if (absl::Status s = rt->backend()->Forward(entries, logits); !s.ok()) return s;
    done += k;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FullCacheRun> RunFullCache(Runtime* rt, const NeedleStream& stream, int32_t distance,
                                          const SamplingParams& filler_sampling, int32_t prefill_chunk) {
  if (absl::Status s = CheckStream(*rt, stream, distance); !s.ok()) return s;
  const Tokenizer* tok = rt->tokenizer();
  const size_t vocab = static_cast<size_t>(rt->config().vocab_size);
  // The filler is story text: no end of turn, no template markers.
  std::vector<int32_t> masked;
  for (int32_t id = 0; id < static_cast<int32_t>(vocab); ++id) {
    if (id < tok->vocab_size() && (tok->IsEndOfGeneration(id) || tok->IsSpecial(id))) masked.push_back(id);
  }
  for (int32_t id : stream.filler_banned) {
    if (id >= 0 && id < static_cast<int32_t>(vocab)) masked.push_back(id);
  }
  absl::StatusOr<std::unique_ptr<KvCache>> cache = rt->MakeKvCache(stream.TotalTokens(distance) + 16);
  if (!cache.ok()) return cache.status();
  SequenceKv kv(cache->get());
  ForwardEntry entry;
  entry.kv = &kv;
  std::vector<float> logits;
  if (absl::Status s = Prefill(rt, std::span<ForwardEntry>(&entry, 1), stream.prompt, prefill_chunk, &logits);
      !s.ok()) {
    return s;
  }
  int32_t pos = static_cast<int32_t>(stream.prompt.size());
  auto feed = [&](const int32_t& token) {
    entry.tokens = std::span<const int32_t>(&token, 1);
    entry.start_pos = pos++;
    return rt->backend()->Forward(std::span<ForwardEntry>(&entry, 1), &logits);
  };

  FullCacheRun out;
  out.filler.reserve(distance);
  for (const int32_t& t : stream.fact) {
    if (absl::Status s = feed(t); !s.ok()) return s;
  }
  Sampler sampler(filler_sampling);
  std::vector<float> row(vocab);
  for (int32_t k = 0; k < distance; ++k) {
    std::copy(logits.begin(), logits.begin() + vocab, row.begin());
    for (int32_t id : masked) row[id] = -std::numeric_limits<float>::infinity();
    out.filler.push_back(sampler.Sample(row, stream.prompt, out.filler));
    if (absl::Status s = feed(out.filler.back()); !s.ok()) return s;
  }
  for (const int32_t& t : stream.cue) {
    if (absl::Status s = feed(t); !s.ok()) return s;
  }
  out.answer.reserve(stream.answer_tokens);
  for (int32_t k = 0; k < stream.answer_tokens; ++k) {
    out.answer.push_back(ArgMax(std::span<const float>(logits.data(), vocab)));
    if (k + 1 < stream.answer_tokens) {
      if (absl::Status s = feed(out.answer.back()); !s.ok()) return s;
    }
  }
  return out;
}

absl::StatusOr<std::vector<ConfigAnswer>> RunCompressed(Runtime* rt, const NeedleStream& stream,
                                                        const std::vector<int32_t>& filler,
                                                        std::span<const PolicySpec> specs, int32_t prefill_chunk) {
  const int32_t distance = static_cast<int32_t>(filler.size());
  if (filler.empty()) return absl::InvalidArgumentError("needle: empty filler");
  if (absl::Status s = CheckStream(*rt, stream, distance); !s.ok()) return s;

  // Sequence 0 is the full cache; sequence i + 1 is specs[i] (ReplayBatch:
  // the passage teacher-forced into all, then each its own greedy answer).
  std::vector<int32_t> passage = stream.fact;
  passage.insert(passage.end(), filler.begin(), filler.end());
  passage.insert(passage.end(), stream.cue.begin(), stream.cue.end());
  const int32_t n_passage = static_cast<int32_t>(passage.size());
  const size_t n_seq = specs.size() + 1;
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made =
      ReplayBatch::Create(rt, stream.prompt, passage, n_passage + stream.answer_tokens, specs, /*record=*/false);
  if (!made.ok()) return made.status();
  ReplayBatch& batch = **made;
  if (absl::Status s = batch.Prefill(prefill_chunk); !s.ok()) return s;
  // The prefill made passage[0]; each step feeds one token and makes the
  // next: the passage's, then the answer's.
  for (int32_t t = 1; t < n_passage + stream.answer_tokens; ++t) {
    if (absl::Status s = batch.Step(); !s.ok()) return s;
  }

  std::vector<ConfigAnswer> out(n_seq);
  for (size_t i = 0; i < n_seq; ++i) {
    const std::vector<int32_t>& g = batch.generated(i);
    out[i].answer.assign(g.begin() + n_passage, g.end());
  }
  out[0].peak_slots = batch.reference_kv().peak_slots();
  for (size_t i = 1; i < n_seq; ++i) {
    out[i].peak_slots = batch.kv(i - 1).peak_slots();
    out[i].evictions = batch.compressor(i - 1).evictions();
  }
  return out;
}

bool EvictsBeforeLastStep(const KvPolicyOptions& options, int32_t n_prompt, int32_t feeds) {
  if (!options.compresses()) return false;
  EvictionSchedule schedule(options, n_prompt);
  // Without an eviction the cache holds n_prompt + i slots after step i
  // (step 0: the prefill); the call after the last step (i == feeds) is
  // the one that changes nothing.
  for (int32_t i = 0; i < feeds; ++i) {
    if (schedule.OnDecodeStep(n_prompt + i)) return true;
  }
  return false;
}

}  // namespace beacon::eval
