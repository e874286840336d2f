#include "engine/step_executor.h"

#include "kernels/cpu/thread_pool.h"

namespace beacon {

absl::Status StepExecutor::Run(std::span<const ExecItem> items, std::vector<ExecResult>* results) {
  entries_.clear();
  first_row_.clear();
  last_row_.clear();
  size_t rows = 0;
  bool any_all_logits = false;
  for (const ExecItem& item : items) {
    const ForwardEntry e = item.gen->NextEntry(item.max_tokens);
    entries_.push_back(e);
    first_row_.push_back(rows);
    rows += e.all_logits ? e.tokens.size() : 1;  // prompt logprobs: a row per token
    last_row_.push_back(rows - 1);
    any_all_logits |= e.all_logits;
  }
  // Grammar masks of the sequences that draw under one this step, filled
  // before the pass, in parallel across sequences on the host pool.
  masked_.clear();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].gen->constrained()) masked_.push_back(i);
  }
  if (!masked_.empty()) {
    auto fill = [&](int64_t begin, int64_t end, int) {
      for (int64_t k = begin; k < end; ++k) {
        const size_t i = masked_[static_cast<size_t>(k)];
        items[i].gen->PrepareMask(static_cast<int32_t>(entries_[i].tokens.size()));
      }
    };
    ThreadPool* pool = backend_->host_pool();
    if (pool != nullptr && masked_.size() > 1) {
      pool->ParallelFor(static_cast<int64_t>(masked_.size()), 1, fill);
    } else {
      fill(0, static_cast<int64_t>(masked_.size()), 0);
    }
  }
  // A device that samples takes the draw where the logits are (no logits
  // copy, no host sampler) unless some sequence needs the logits on the
  // host (penalties, logit_bias, logprobs; prompt logprobs need every row).
  on_device_ = backend_->samples_on_device() && !any_all_logits && observer_ == nullptr;
  for (size_t i = 0; on_device_ && i < items.size(); ++i) on_device_ = items[i].gen->device_samplable();
  absl::Status st;
  if (on_device_) {
    sampling_.clear();
    for (const ExecItem& item : items) sampling_.push_back(item.gen->device_sampling());
    st = backend_->ForwardSample(entries_, sampling_, &sampled_);
  } else {
    st = backend_->Forward(entries_, &logits_);
  }
  if (!st.ok()) return st;
  if (observer_ != nullptr) observer_->AfterForward(items, *this);

  const size_t vocab = static_cast<size_t>(backend_->config().vocab_size);
  results->clear();
  results->reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Generation& g = *items[i].gen;
    const SequenceCompressor* c = g.compressor();
    const int64_t evictions_before = c != nullptr ? c->evictions() : 0;
    const int64_t evicted_before = c != nullptr ? c->evicted_slots() : 0;
    ExecResult r;
    r.fed = static_cast<int32_t>(entries_[i].tokens.size());
    const size_t n_rows = entries_[i].all_logits ? static_cast<size_t>(r.fed) : 1;
    r.event = on_device_
                  ? g.AdvanceSampled(r.fed, sampled_[i])
                  : g.Advance(r.fed, std::span<const float>(logits_.data() + first_row_[i] * vocab, n_rows * vocab));
    if (c != nullptr) {
      r.evictions = c->evictions() - evictions_before;
      r.evicted_slots = c->evicted_slots() - evicted_before;
    }
    results->push_back(std::move(r));
  }
  return absl::OkStatus();
}

std::span<const float> StepExecutor::logits(size_t item) const {
  const size_t vocab = static_cast<size_t>(backend_->config().vocab_size);
  return std::span<const float>(logits_).subspan(last_row_[item] * vocab, vocab);
}

}  // namespace beacon
