// The real StepEngine: Generations (engine/generation.h) on a Backend over a
// shared KvCache. Runs the step's ragged batch through the StepExecutor
// (engine/step_executor.h: forward pass, sampling, compression), streams
// each sampled token to the request's sink, and on Remove() reports the
// request's final record. Each Generation writes the KV the scheduler's
// KvCacheManager registered for it (Scheduler::Add); the engine holds no KV
// bookkeeping of its own.
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
#include "kv/serving/kv_cache_manager.h"
#include "scheduler/scheduler.h"
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
  // up at admission (recomputes included), and of those found cached. The
  // KV manager's counts (KvCacheManager), which the engine loop copies in.
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
};

// What the scheduler's KV manager must know of a prepared request
// (Scheduler::Add); `with_prompt`: the prefix cache is on, and keys its
// blocks by the prompt's ids.
KvSeqSpec KvSeqSpecFor(const PreparedRequest& request, bool with_prompt);

class GenerationEngine;

// How a request enters the serving core (EngineLoop, beacon-serve-bench,
// tests): `scheduler` queues it and registers its KV, then `engine` builds
// its generation on that KV. On an error (the queue is full, the request can
// never fit, its options are invalid) nothing of it is kept anywhere and
// `sink` has heard nothing: the caller rejects it.
absl::Status AddRequest(Scheduler& scheduler, GenerationEngine& engine, RequestId id, PreparedRequest request,
                        std::shared_ptr<RequestSink> sink);

class GenerationEngine : public StepEngine {
 public:
  // All pointers must outlive the engine.
  GenerationEngine(Backend* backend, KvCache* cache, const Tokenizer* tokenizer, const ModelConfig& config);
  ~GenerationEngine() override;

  // Creates the request's sequence on `kv` (what Scheduler::Add returned:
  // empty, and alive until the scheduler's Remove of the request).
  // INVALID_ARGUMENT if the generation options are invalid.
  absl::Status Add(RequestId id, PreparedRequest request, std::shared_ptr<RequestSink> sink, SequenceKv* kv);

  absl::Status Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) override;
  int32_t Preempt(RequestId id) override;
  void Remove(const SchedRequest& request) override;
  // The salt for a cache of this model: what besides the tokens changes a
  // block's K/V (the model file, the KV element type, the RoPE table).
  static uint64_t PrefixCacheSaltFor(std::string_view model, const ModelConfig& config, const KvCache& cache);

  // Optional; must outlive the engine. Set before the first Add().
  void set_observer(EngineObserver* observer) { observer_ = observer; }

  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  // Sequences whose KV policy compresses.
  int32_t num_compressing() const;
  // Over live sequences: the tokens a full cache without sharing would hold
  // for them (their positions); against the slots held
  // (KvCacheManager::HeldSlots) it is what eviction and sharing save.
  int64_t KvLogicalTokens() const;
  const EngineTotals& totals() const { return totals_; }

 private:
  // What the engine keeps of a request, keyed by its id: the forward pass's
  // state (the Generation: tokens, sampler, compressor, on the scheduler's
  // KV) and the output stream. Everything else about the request (its name,
  // arrival, timings, preemptions, cached tokens, reservation) is in the
  // scheduler's record, which Remove() reads.
  struct Seq {
    std::unique_ptr<Generation> gen;
    std::shared_ptr<RequestSink> sink;
    bool prompt_logprobs_sent = false;
    bool report_cached_tokens = false;  // PreparedRequest's
  };
  // A prefill chunk: a run that has fed nothing yet starts past the `computed`
  // slots the scheduler took by reference at admission (KvCacheManager::Adopt,
  // already in the sequence's KV). INTERNAL when the scheduler's count and
  // the generation's disagree (a broken protocol, not a client's error).
  absl::Status StartChunk(Seq& s, const ScheduledSeq& w);
  // A sampled token to the sink (EOS and stop ids unstreamed).
  void Stream(Seq& s, const TokenEvent& ev);

  Backend* backend_;
  KvCache* cache_;
  const Tokenizer* tokenizer_;
  const ModelConfig& config_;
  absl::flat_hash_map<RequestId, Seq> seqs_;
  StepExecutor executor_;        // builds and runs every step's batch
  std::vector<ExecItem> items_;  // reused across steps
  std::vector<Seq*> owners_;     // items_[i] is owners_[i]'s
  std::vector<ExecResult> results_;
  std::string last_error_;  // the failed step's error, for its sequences' final records
  EngineTotals totals_;
  EngineObserver* observer_ = nullptr;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_GENERATION_ENGINE_H_
