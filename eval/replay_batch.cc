#include "eval/replay_batch.h"

#include <algorithm>

#include "engine/generation.h"

namespace beacon::eval {

ReplayBatch::ReplayBatch(Runtime* rt, std::unique_ptr<KvCache> cache)
    : rt_(rt), cache_(std::move(cache)), ref_kv_(cache_.get()), recorder_(PolicyInfoFor(rt->config())) {}

absl::StatusOr<std::unique_ptr<ReplayBatch>> ReplayBatch::Create(Runtime* rt, int32_t n_prompt, int32_t n_trace,
                                                                 std::span<const PolicySpec> specs, bool record) {
  const PolicyModelInfo info = PolicyInfoFor(rt->config());
  int64_t slots = n_prompt + n_trace + 16;
  for (const PolicySpec& s : specs) slots += SequenceCompressor::PeakSlots(s.options, n_prompt, n_trace) + 16;
  absl::StatusOr<std::unique_ptr<KvCache>> cache = rt->MakeKvCache(slots);
  if (!cache.ok()) return cache.status();
  std::unique_ptr<ReplayBatch> b(new ReplayBatch(rt, *std::move(cache)));
  b->replays_.resize(specs.size());
  b->entries_.resize(specs.size() + 1);
  b->entries_[0].kv = &b->ref_kv_;
  b->entries_[0].policy = record ? &b->recorder_ : nullptr;
  b->tokens_.resize(specs.size() + 1);
  for (size_t i = 0; i < specs.size(); ++i) {
    Replay& r = b->replays_[i];
    r.kv = std::make_unique<SequenceKv>(b->cache_.get());
    absl::StatusOr<std::unique_ptr<SequenceCompressor>> c =
        SequenceCompressor::Create(specs[i].options, info, n_prompt);
    if (!c.ok()) return c.status();
    r.compressor = std::move(*c);
    r.compressor->set_thread_pool(rt->backend()->host_pool());
    b->entries_[i + 1].kv = r.kv.get();
    b->entries_[i + 1].policy = r.compressor->policy();
  }
  return b;
}

absl::Status ReplayBatch::Prefill(std::span<const int32_t> prompt, int32_t chunk) {
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  for (int32_t done = 0; done < n_prompt;) {
    const int32_t n = std::min(chunk, n_prompt - done);
    for (ForwardEntry& e : entries_) {
      e.tokens = prompt.subspan(done, n);
      e.start_pos = done;
    }
    if (absl::Status s = rt_->backend()->Forward(entries_, &logits_); !s.ok()) return s;
    done += n;
  }
  for (Replay& r : replays_) r.compressor->AfterDecodeStep(r.kv.get(), n_prompt);
  return absl::OkStatus();
}

absl::Status ReplayBatch::Feed(int32_t token, int32_t position) {
  std::fill(tokens_.begin(), tokens_.end(), token);
  return FeedEach(tokens_, position);
}

absl::Status ReplayBatch::FeedEach(std::span<const int32_t> tokens, int32_t position) {
  if (tokens.size() != entries_.size()) return absl::InvalidArgumentError("FeedEach: one token per entry");
  if (tokens.data() != tokens_.data()) std::copy(tokens.begin(), tokens.end(), tokens_.begin());
  for (size_t i = 0; i < entries_.size(); ++i) {
    entries_[i].tokens = std::span<const int32_t>(&tokens_[i], 1);
    entries_[i].start_pos = position;
  }
  return rt_->backend()->Forward(entries_, &logits_);
}

void ReplayBatch::AfterStep(int32_t position) {
  for (Replay& r : replays_) r.compressor->AfterDecodeStep(r.kv.get(), position + 1);
}

std::span<const float> ReplayBatch::logits(size_t entry) const {
  const size_t vocab = static_cast<size_t>(rt_->config().vocab_size);
  return std::span<const float>(logits_.data() + entry * vocab, vocab);
}

}  // namespace beacon::eval
