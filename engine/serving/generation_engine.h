// The real StepEngine: Generations (engine/generation.h) on a Backend over a
// shared KvCache. Runs the step's ragged batch through the StepExecutor
// (engine/step_executor.h: forward pass, sampling, compression), streams
// each sampled token to the request's sink, and on Remove() reports the
// request's final record and frees its KV.
//
// Thread ownership: the engine thread (EngineLoop).
#ifndef BEACON_ENGINE_SERVING_GENERATION_ENGINE_H_
#define BEACON_ENGINE_SERVING_GENERATION_ENGINE_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/backend.h"
#include "engine/generation.h"
#include "engine/serving/engine_observer.h"
#include "engine/serving/request_sink.h"
#include "engine/serving/serve_request.h"
#include "engine/step_executor.h"
#include "kv/kv_cache_manager.h"
#include "kv/prefix_cache.h"
#include "scheduler/step_engine.h"

namespace beacon {

// Totals since start, for metrics and tests.
struct EngineTotals {
  // Prompt tokens prefilled, computed or taken by reference (the prefix
  // cache, a sample group's prompt); recomputes included.
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;  // tokens sampled
  int64_t evictions = 0;
  int64_t evicted_tokens = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  // Prefix cache (vLLM's prefix_cache_queries / _hits): prompt tokens looked
  // up at admission (recomputes included), and of those found cached.
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
};

class GenerationEngine : public StepEngine {
 public:
  // All pointers must outlive the engine.
  GenerationEngine(Backend* backend, KvCache* cache, const Tokenizer* tokenizer, const ModelConfig& config);
  ~GenerationEngine() override;

  // Creates the request's sequence (no KV yet). INVALID_ARGUMENT if the
  // generation options are invalid.
  absl::Status Add(RequestId id, PreparedRequest request, std::shared_ptr<RequestSink> sink);
  // Drops a sequence the scheduler refused, without a final record.
  void Forget(RequestId id);

  absl::Status Run(std::span<const SeqWork> work, std::vector<SeqOutcome>* outcomes) override;
  int32_t Preempt(RequestId id) override;
  void Remove(const SchedRequest& request) override;
  // Every sequence's KV and what it may share (kv/kv_cache_manager.h): a
  // sample group's later member takes sample 0's whole prompt blocks once
  // sample 0 has run the prompt (waits until then); any other request that
  // holds no KV takes its prompt's leading blocks from the prefix cache, if
  // on. Each Generation borrows its sequence's KV from it.
  KvCacheManager& kv() override { return kv_; }
  const KvCacheManager& kv() const { return kv_; }

  // Turns on automatic prefix caching (kv/prefix_cache.h) over the cache's
  // pool; `salt` names what else changes a block's K/V (PrefixCacheSalt).
  // Before the first Add().
  void EnablePrefixCache(uint64_t salt) { kv_.EnablePrefixCache(salt); }
  // Null when off.
  const PrefixCache* prefix_cache() const { return kv_.prefix_cache(); }
  // The salt for a cache of this model: what besides the tokens changes a
  // block's K/V (the model file, the KV element type, the RoPE table).
  static uint64_t PrefixCacheSaltFor(std::string_view model, const ModelConfig& config, const KvCache& cache);

  // Optional; must outlive the engine. Set before the first Add().
  void set_observer(EngineObserver* observer) { observer_ = observer; }

  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  // Sequences whose KV policy compresses.
  int32_t num_compressing() const;
  // Over live sequences: KV slots held (physically: a block several hold by
  // reference counts once), and the tokens a full cache without sharing
  // would hold for them (their positions); the difference is what eviction
  // and sharing save.
  void KvTokens(int64_t* cached, int64_t* logical) const;
  const EngineTotals& totals() const { return totals_; }

 private:
  struct Seq {
    std::unique_ptr<Generation> gen;
    std::shared_ptr<RequestSink> sink;
    std::string request_id;
    SchedClock::time_point arrival;
    SchedClock::time_point first_token{};
    SchedClock::time_point last_token{};
    bool has_first_token = false;
    int32_t preemptions = 0;
    uint64_t seed = 0;
    bool prompt_logprobs_sent = false;
    RequestId group = 0;                // sample 0's id in a sample group, else 0
    int32_t index = 0;                  // sample index in the group
    int32_t cached_tokens = -1;         // prompt tokens taken by reference at first admission (-1: not run yet)
    bool report_cached_tokens = false;  // PreparedRequest's
  };
  // A prefill that has run nothing yet starts past the slots its KV took by
  // reference at admission (the scheduler's KvCacheManager::Adopt); the
  // first such chunk also records them as the request's cached tokens.
  void StartPastSharedPrefix(Seq& s);
  // A sampled token: timings, observer and the sink (EOS and stop ids unstreamed).
  void Stream(Seq& s, const TokenEvent& ev, SchedClock::time_point now);

  Backend* backend_;
  KvCache* cache_;
  const Tokenizer* tokenizer_;
  const ModelConfig& config_;
  KvCacheManager kv_;  // declared before seqs_: their Generations borrow its KV
  absl::flat_hash_map<RequestId, Seq> seqs_;
  StepExecutor executor_;        // builds and runs every step's batch
  std::vector<StepItem> items_;  // reused across steps
  std::vector<Seq*> owners_;     // items_[i] is owners_[i]'s
  std::vector<StepResult> results_;
  std::string last_error_;  // the failed step's error, for its sequences' final records
  EngineTotals totals_;
  EngineObserver* observer_ = nullptr;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_GENERATION_ENGINE_H_
