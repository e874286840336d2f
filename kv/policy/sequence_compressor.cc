#include "kv/policy/sequence_compressor.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_pool.h"
#include "kv/policy/policy_registry.h"
#include "kv/store/compaction.h"
#include "util/log.h"

namespace beacon {

absl::StatusOr<std::unique_ptr<SequenceCompressor>> SequenceCompressor::Create(const KvPolicyOptions& options,
                                                                               const PolicyModelInfo& model,
                                                                               int32_t prompt_len) {
  absl::StatusOr<std::unique_ptr<KvPolicy>> policy = CreateKvPolicy(options, model);
  if (!policy.ok()) return policy.status();
  return std::unique_ptr<SequenceCompressor>(new SequenceCompressor(options, model, prompt_len, std::move(*policy)));
}

SequenceCompressor::SequenceCompressor(const KvPolicyOptions& options, const PolicyModelInfo& model, int32_t prompt_len,
                                       std::unique_ptr<KvPolicy> policy)
    : options_(options), model_(model), policy_(std::move(policy)), schedule_(options, prompt_len) {
  protection_.prompt_len = prompt_len;
  protection_.keep_prompt = options.keep_prompt;
  // The protected slots must fit the bound with the window whole: with
  // keep_prompt the bound (prompt + budget) covers the prompt, but sinks
  // past a short prompt are extra, and budget >= window is all validation
  // can ask without the prompt. So sinks beyond bound - window are not
  // protected; the newest window (the current token included) always is.
  // The window is the policy's (ProtectedWindow: SnapKV's observation
  // window, H2O's recent half of the budget), at least options.window.
  const int32_t window = ProtectedWindow(options);
  protection_.sinks = std::min(options.sinks, std::max(0, schedule_.bound() - window));
  protection_.window = window;
  policy_->SetPromptLength(prompt_len);
  policy_->SetProtectedLead(options.keep_prompt ? std::max(prompt_len, protection_.sinks) : protection_.sinks);
  keep_.resize(model.n_kv_heads);
}

void SequenceCompressor::AfterDecodeStep(SequenceKv* kv, int32_t next_position) {
  if (schedule_.OnDecodeStep(kv->num_slots())) Evict(kv, next_position);
}

int32_t SequenceCompressor::Evict(SequenceKv* kv, int32_t next_position) {
  const int32_t n = kv->num_slots();
  const int32_t n_keep = bound();
  if (n <= n_keep || !options_.compresses()) return 0;
  KvCache* cache = kv->cache();
  if (KvDeviceStorage* device = cache->device_storage(); device != nullptr) {
    // The data lives on a device: it scores, selects and compacts there. A
    // failure leaves the slots as they were and fails the sequence.
    if (!failure_.ok()) return 0;
    const absl::Status s = device->Evict(kv, policy_.get(), options_, protection_, n_keep, next_position);
    if (!s.ok()) {
      failure_ = absl::Status(s.code(), absl::StrCat("KV eviction on the device failed: ", s.message()));
      logging::Error("%s", failure_.ToString());
      return 0;
    }
  } else {
    EvictOnHost(kv, n_keep, next_position);
  }
  kv->Truncate(n_keep);
  schedule_.OnEvicted();
  ++evictions_;
  evicted_slots_ += n - n_keep;
  return n - n_keep;
}

void SequenceCompressor::EvictOnHost(SequenceKv* kv, int32_t n_keep, int32_t next_position) {
  const int32_t n = kv->num_slots();
  scores_.resize(n);
  KvCache* cache = kv->cache();
  if (pool_ != nullptr && pool_->n_threads() > 1 && policy_->concurrent_scoring()) {
    // Score and select every (layer, KV head) in parallel, then compact
    // the layers in parallel. Equivalent to the serial loop below: scoring
    // layer l reads only layer l's keys and policy state, which compacting
    // another layer does not touch (a concurrent_scoring policy promises
    // that its OnCompacted(l) changes nothing Score(l', ...) or
    // OnCompacted(l') reads or writes for l' != l), and CompactLayer(l)
    // moves only layer l's slots. (Compacting was 0.8-1.9 ms of a 1.5B
    // eviction on the driving thread alone; issue 34.)
    const int n_kv = model_.n_kv_heads;
    const int64_t pairs = int64_t{model_.n_layers} * n_kv;
    all_scores_.resize(static_cast<size_t>(pairs) * n);
    all_keep_.resize(model_.n_layers);
    for (auto& layer : all_keep_) layer.resize(n_kv);
    pool_->ParallelFor(pairs, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t p = begin; p < end; ++p) {
        const int l = static_cast<int>(p / n_kv), h = static_cast<int>(p % n_kv);
        KeysView keys(cache, kv, l);
        float* scores = all_scores_.data() + static_cast<size_t>(p) * n;
        policy_->Score(l, h, keys, next_position, scores);
        SelectKeep(scores, keys, h, protection_, n_keep, &all_keep_[l][h]);
      }
    });
    pool_->ParallelFor(model_.n_layers, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t l = begin; l < end; ++l) {
        CompactLayer(cache, *kv, static_cast<int>(l), all_keep_[l]);
        policy_->OnCompacted(static_cast<int>(l), all_keep_[l]);
      }
    });
    return;
  }
  for (int l = 0; l < model_.n_layers; ++l) {
    KeysView keys(cache, kv, l);
    for (int h = 0; h < model_.n_kv_heads; ++h) {
      policy_->Score(l, h, keys, next_position, scores_.data());
      SelectKeep(scores_.data(), keys, h, protection_, n_keep, &keep_[h]);
    }
    CompactLayer(cache, *kv, l, keep_);
    policy_->OnCompacted(l, keep_);
  }
}

}  // namespace beacon
