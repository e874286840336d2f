// The real StepEngine: Generations (engine/generation.h) on a Backend over a
// shared KvCache. Runs the step's ragged batch, samples, compresses, streams
// each sampled token to the request's sink, and on Remove() reports the
// request's final record and frees its KV.
//
// Thread ownership: the engine thread (EngineLoop).
#ifndef BEACON_SERVER_GENERATION_ENGINE_H_
#define BEACON_SERVER_GENERATION_ENGINE_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/backend.h"
#include "engine/generation.h"
#include "kv/prefix_cache.h"
#include "scheduler/step_engine.h"
#include "server/engine_observer.h"
#include "server/request_sink.h"
#include "server/serve_request.h"

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
  int32_t TotalBlocks() const override { return cache_->pool().num_blocks(); }
  int32_t FreeBlocks() const override { return cache_->pool().num_free(); }
  // Of FreeBlocks, the idle cached ones (prefix cache).
  int32_t IdleBlocks() const { return cache_->pool().num_idle(); }
  int32_t BlockSize() const override { return cache_->shape().block_size; }
  int32_t BlocksToAppend(RequestId id, int32_t n) const override;
  int32_t Preempt(RequestId id) override;
  void Remove(const SchedRequest& request) override;
  int32_t OwnBlocks(RequestId id) const override;
  // A sample group's later member takes sample 0's whole prompt blocks once
  // sample 0 has run the prompt (waits until then); any other request that
  // holds no KV takes its prompt's leading blocks from the prefix cache, if
  // on (Generation::PrefixBlocksWanted says how many it may).
  PrefixProbe ProbePrefix(RequestId id) const override;
  int32_t AdoptPrefix(RequestId id) override;

  // Turns on automatic prefix caching (kv/prefix_cache.h) over the cache's
  // pool; `salt` names what else changes a block's K/V (PrefixCacheSalt).
  // Before the first Add().
  void EnablePrefixCache(uint64_t salt);
  // Null when off.
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }
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
    RequestId group = 0;         // sample 0's id in a sample group, else 0
    int32_t index = 0;           // sample index in the group
    int32_t cached_tokens = -1;  // prompt tokens taken by reference at first admission
  };
  // One step's forward pass: an entry per SeqWork, in order.
  struct StepBatch {
    std::vector<ForwardEntry> entries;
    std::vector<Seq*> owners;       // entries[i] is owners[i]'s
    std::vector<size_t> first_row;  // entries[i]'s first logits row
    bool on_device = false;         // the backend samples (ForwardSample), no logits
  };

  // Run's phases: gather the batch, run it, then per entry advance the
  // generation and stream what it sampled.
  StepBatch Gather(std::span<const SeqWork> work);
  // Fills logits_ or sampled_; on failure keeps the error for the final
  // records of the step's sequences (last_error_).
  absl::Status Forward(const StepBatch& b);
  // Feeds entry i's logits rows (or drawn token) to its generation, counting its evictions.
  TokenEvent Advance(const StepBatch& b, size_t i);
  // A sampled token: timings, observer and the sink (EOS and stop ids unstreamed).
  void Stream(Seq& s, const TokenEvent& ev, SchedClock::time_point now);
  // Where a request holding no KV can take its leading blocks from: a
  // sample group's first member (donor) or the prefix cache (match).
  struct PrefixSource {
    PrefixProbe probe;
    const SequenceKv* donor = nullptr;
    PrefixMatch match;
  };
  PrefixSource FindPrefix(RequestId id) const;
  // Indexes the full prompt blocks a step's prefill completed.
  void CachePromptBlocks(const Seq& s);

  Backend* backend_;
  KvCache* cache_;
  const Tokenizer* tokenizer_;
  const ModelConfig& config_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null: off
  absl::flat_hash_map<RequestId, Seq> seqs_;
  std::vector<float> logits_;
  std::vector<EntrySampling> sampling_;  // device sampling: per entry
  std::vector<int32_t> sampled_;
  std::string last_error_;  // the failed step's error, for its sequences' final records
  EngineTotals totals_;
  EngineObserver* observer_ = nullptr;
};

}  // namespace beacon

#endif  // BEACON_SERVER_GENERATION_ENGINE_H_
