#include "server/ops/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <sstream>

namespace beacon {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Seconds, from 1 ms: request latencies (TTFT, end to end, queue) reach minutes
// for long reasoning outputs.
const prometheus::Histogram::BucketBoundaries kLatency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,  0.075, 0.1,
                                                          0.15,  0.2,    0.3,   0.5,  0.75,  1.0,   2.5,   5.0,
                                                          10.0,  20.0,   40.0,  80.0, 160.0, 320.0, 640.0, 1280.0};
// Seconds per token, from 1 ms.
const prometheus::Histogram::BucketBoundaries kPerToken = {
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5};
const prometheus::Histogram::BucketBoundaries kStep = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
                                                       0.075, 0.1,    0.15,  0.2,    0.3,  0.5,   1.0,  2.5,  5.0};
const prometheus::Histogram::BucketBoundaries kKvTokens = {16,   32,   64,   128,   256,   512,   1024,
                                                           2048, 4096, 8192, 16384, 32768, 65536, 131072};
// Tokens per request (prompt, generation): 1-2-5 steps, as vLLM's.
const prometheus::Histogram::BucketBoundaries kTokenCounts = {1,    2,    5,    10,    20,    50,    100,    200,   500,
                                                              1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};
// (prompt + completion tokens) / peak cached tokens: 1 = nothing evicted.
const prometheus::Histogram::BucketBoundaries kRatio = {1.0, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64};

std::string RejectReason(absl::StatusCode c) {
  switch (c) {
    case absl::StatusCode::kResourceExhausted: return "queue_full";
    case absl::StatusCode::kInvalidArgument: return "invalid";
    case absl::StatusCode::kUnavailable: return "draining";
    case absl::StatusCode::kUnauthenticated: return "unauthenticated";
    default: return "other";
  }
}

// Advances `c` to the engine total `now`. Totals only grow; a scrape holding
// an older snapshot than the previous one adds nothing.
void Advance(const CounterSet& c, int64_t now, int64_t* seen) {
  if (now <= *seen) return;
  c.Increment(static_cast<double>(now - *seen));
  *seen = now;
}

}  // namespace

void GaugeSet::Set(double v) const {
  for (prometheus::Gauge* g : each) g->Set(v);
}
void CounterSet::Increment(double v) const {
  for (prometheus::Counter* c : each) c->Increment(v);
}
void HistogramSet::Observe(double v) const {
  for (prometheus::Histogram* h : each) h->Observe(v);
}

GaugeSet ServerMetrics::Gauge(const FamilyNames& names, const std::string& help, const prometheus::Labels& labels) {
  GaugeSet out;
  for (const std::string& n : ExposedNames(names, naming_)) {
    out.each.push_back(
        &BuildGauge().Name(n).Help(help).Labels({{"model_name", model_name_}}).Register(*registry_).Add(labels));
  }
  return out;
}

CounterSet ServerMetrics::Counter(const FamilyNames& names, const std::string& help, const prometheus::Labels& labels) {
  CounterSet out;
  for (const std::string& n : ExposedNames(names, naming_)) {
    out.each.push_back(
        &BuildCounter().Name(n).Help(help).Labels({{"model_name", model_name_}}).Register(*registry_).Add(labels));
  }
  return out;
}

HistogramSet ServerMetrics::Histogram(const FamilyNames& names, const std::string& help,
                                      const prometheus::Histogram::BucketBoundaries& buckets,
                                      const prometheus::Labels& labels) {
  HistogramSet out;
  for (const std::string& n : ExposedNames(names, naming_)) {
    out.each.push_back(&BuildHistogram()
                            .Name(n)
                            .Help(help)
                            .Labels({{"model_name", model_name_}})
                            .Register(*registry_)
                            .Add(labels, buckets));
  }
  return out;
}

// prometheus-cpp registers a name once and hands the same family back for
// another series under it (Registry::Add with equal constant labels), so the
// labelled families below add series to one family per name.
ServerMetrics::ServerMetrics(const MetricsInfo& info)
    : naming_(info.naming),
      model_name_(info.served_model_name.empty() ? info.model : info.served_model_name),
      registry_(std::make_shared<prometheus::Registry>()) {
  namespace n = metric_names;
  Gauge(n::kServerInfo, "Constant 1; the labels describe the served model and the KV configuration",
        {{"model", info.model},
         {"architecture", info.architecture},
         {"kv_block_size", std::to_string(info.block_size)},
         {"kv_pool_tokens", std::to_string(info.pool_tokens)},
         {"kv_cache_dtype", info.kv_cache_dtype},
         {"kv_policy", std::string(KvPolicyName(info.default_policy))},
         {"kv_budget", std::to_string(info.default_budget)},
         {"admission", info.admission},
         {"metrics_prefix", std::string(MetricsNamingName(info.naming))}})
      .Set(1);
  running_ = Gauge(n::kNumRequestsRunning, "Requests in the running batch (prefilling or decoding)");
  waiting_ = Gauge(n::kNumRequestsWaiting, "Requests queued for admission (preempted ones included)");
  blocks_total_ = Gauge(n::kKvPoolBlocks, "KV cache blocks in the pool");
  blocks_used_ = Gauge(n::kKvBlocksUsed, "KV cache blocks holding data");
  blocks_free_ = Gauge(n::kKvBlocksFree, "KV cache blocks free");
  blocks_reserved_ = Gauge(n::kKvBlocksReserved, "KV cache blocks reserved by admission (reserve mode)");
  usage_perc_ =
      Gauge(n::kKvCacheUsagePerc, "Fraction of KV cache blocks taken (0..1): max(used, reserved by admission) / pool");
  used_perc_ = Gauge(n::kKvCacheUsedPerc, "Fraction of KV cache blocks holding data (0..1): used / pool");
  compressing_ = Gauge(n::kNumRequestsCompressing, "Running requests whose KV policy evicts");
  cached_tokens_ = Gauge(n::kKvCachedTokens, "KV slots held by live requests");
  logical_tokens_ =
      Gauge(n::kKvLogicalTokens, "KV slots live requests would hold without eviction (their token positions)");
  Gauge(n::kKvBytesPerToken, "Bytes of K and V for one token slot, all layers")
      .Set(static_cast<double>(info.kv_bytes_per_token));
  step_batch_ = Gauge(n::kEngineStepBatchSize, "Sequences in the last engine step");
  step_tokens_ = Gauge(n::kEngineStepTokens, "Tokens (prefill + decode) in the last engine step");
  engine_broken_ =
      Gauge(n::kEngineBroken, "1 once the engine is broken (failed steps in a row, or a step past --step-timeout-s)");
  step_running_ = Gauge(n::kEngineStepRunningSeconds, "How long the engine step in progress has run (0 between steps)");
  prefix_blocks_ = Gauge(n::kPrefixCacheBlocks, "KV blocks indexed by the prefix cache (held or idle)");
  prefix_idle_blocks_ =
      Gauge(n::kPrefixCacheIdleBlocks, "Prefix-cache blocks no request holds: reusable, counted free, reclaimed LRU");

  prompt_tokens_ = Counter(
      n::kPromptTokens, "Prompt tokens prefilled, computed or reused from the prefix cache (recomputation included)");
  generation_tokens_ = Counter(n::kGenerationTokens, "Tokens generated (sampled)");
  preemptions_ = Counter(n::kPreemptions, "Sequences preempted (KV freed, recomputed later)");
  evictions_ = Counter(n::kKvEvictions, "KV eviction rounds (a sequence compressing its cache)");
  evicted_tokens_ = Counter(n::kKvEvictedTokens, "KV slots evicted, per KV head, summed over rounds");
  steps_ = Counter(n::kEngineSteps, "Engine steps run");
  prefix_queries_ = Counter(n::kPrefixCacheQueries, "Prompt tokens looked up in the prefix cache at admission");
  prefix_hits_ = Counter(n::kPrefixCacheHits, "Of those, tokens whose KV the prefix cache had");
  for (const std::string& r : FinishedReasonLabels(naming_)) {
    finished_[r] = Counter(n::kRequestSuccess, "Requests finished, by finish reason", {{"finished_reason", r}});
  }
  for (const char* reason : {"queue_full", "invalid", "draining", "unauthenticated", "other"}) {
    rejected_[reason] =
        Counter(n::kRequestRejected, "Requests refused before running, by reason", {{"reason", reason}});
  }

  ttft_ = Histogram(n::kTimeToFirstToken, "Arrival to first token", kLatency);
  itl_ = Histogram(n::kInterTokenLatency, "Time between consecutive tokens of a request", kPerToken);
  tpot_ = Histogram(n::kTimePerOutputToken, "Per request: (end - first token) / (output tokens - 1)", kPerToken);
  e2e_ = Histogram(n::kE2eLatency, "Arrival to finish", kLatency);
  queue_ = Histogram(n::kQueueTime, "Arrival to first scheduled step", kLatency);
  prefill_ = Histogram(n::kPrefillTime, "Per request: first scheduled step to first token", kLatency);
  decode_ = Histogram(n::kDecodeTime, "Per request: first token to finish", kLatency);
  inference_ = Histogram(n::kInferenceTime, "Per request: first scheduled step to finish", kLatency);
  request_prompt_tokens_ = Histogram(n::kRequestPromptTokens, "Per request: prompt tokens", kTokenCounts);
  request_generation_tokens_ = Histogram(n::kRequestGenerationTokens,
                                         "Per request: generated tokens (all samples of the request)", kTokenCounts);
  const char* step_help = "Engine step duration, by kind: decode only, prefill only, or mixed";
  step_decode_ = Histogram(n::kEngineStepSeconds, step_help, kStep, {{"kind", "decode"}});
  step_prefill_ = Histogram(n::kEngineStepSeconds, step_help, kStep, {{"kind", "prefill"}});
  step_mixed_ = Histogram(n::kEngineStepSeconds, step_help, kStep, {{"kind", "mixed"}});
  peak_kv_tokens_ = Histogram(n::kRequestPeakKvTokens, "Per request: most KV slots it held", kKvTokens);
  compression_ratio_ = Histogram(n::kRequestKvCompressionRatio,
                                 "Per request: (prompt + output tokens) / peak KV slots; 1 = nothing evicted", kRatio);
}

void ServerMetrics::OnFirstToken(double s) { ttft_.Observe(s); }
void ServerMetrics::OnInterToken(double s) { itl_.Observe(s); }

void ServerMetrics::OnFinish(const StreamFinal& f) {
  finished_.at(FinishedReasonLabel(f.reason, naming_)).Increment();
  e2e_.Observe(f.total_seconds);
  queue_.Observe(f.queue_seconds);
  request_prompt_tokens_.Observe(f.prompt_tokens);
  request_generation_tokens_.Observe(f.completion_tokens);
  // Phases of requests that were scheduled; prefill and decode of those that
  // produced a first token (vLLM's: scheduled -> first token -> finish).
  if (f.total_seconds >= f.queue_seconds && (f.ttft_seconds > 0 || f.completion_tokens > 0)) {
    inference_.Observe(f.total_seconds - f.queue_seconds);
  }
  if (f.ttft_seconds > 0) {
    prefill_.Observe(std::max(0.0, f.ttft_seconds - f.queue_seconds));
    decode_.Observe(std::max(0.0, f.total_seconds - f.ttft_seconds));
  }
  // TPOT of requests that ran to their natural end: a cancel or a deadline
  // would add the wait after the last token.
  const bool natural = f.reason == FinishReason::kStop || f.reason == FinishReason::kLength ||
                       f.reason == FinishReason::kEos || f.reason == FinishReason::kStopSequence;
  if (natural && f.completion_tokens > 1 && f.ttft_seconds > 0) {
    tpot_.Observe((f.total_seconds - f.ttft_seconds) / (f.completion_tokens - 1));
  }
  if (f.kv.peak_cached_tokens > 0) {
    peak_kv_tokens_.Observe(f.kv.peak_cached_tokens);
    compression_ratio_.Observe(static_cast<double>(f.prompt_tokens + f.completion_tokens) / f.kv.peak_cached_tokens);
  }
}

void ServerMetrics::OnRejected(const absl::Status& s) { OnFrontEndRejected(s); }

void ServerMetrics::OnFrontEndRejected(const absl::Status& s) { rejected_.at(RejectReason(s.code())).Increment(); }

void ServerMetrics::OnStep(const StepReport& report, double seconds) {
  if (!report.ran || !report.engine_status.ok()) return;
  (report.prefill_seqs == 0 ? step_decode_ : report.decode_seqs == 0 ? step_prefill_ : step_mixed_).Observe(seconds);
}

void ServerMetrics::Refresh(const LoopStats& s) {
  const int32_t used = s.kv_blocks_total - s.kv_blocks_free;
  running_.Set(s.running);
  waiting_.Set(s.waiting);
  blocks_total_.Set(s.kv_blocks_total);
  blocks_free_.Set(s.kv_blocks_free);
  blocks_used_.Set(used);
  blocks_reserved_.Set(s.kv_blocks_reserved);
  // Reserve admission holds each request's peak footprint from admission on:
  // a replica whose reservations fill the pool admits no one, however few
  // blocks hold data yet, so the gauge pickers and autoscalers read counts
  // them. Optimistic admission reserves nothing: max() is then `used`.
  const double pool = s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_total) : 1.0;
  usage_perc_.Set(s.kv_blocks_total > 0 ? std::max(used, s.kv_blocks_reserved) / pool : 0.0);
  used_perc_.Set(s.kv_blocks_total > 0 ? used / pool : 0.0);
  compressing_.Set(s.compressing);
  cached_tokens_.Set(static_cast<double>(s.kv_cached_tokens));
  logical_tokens_.Set(static_cast<double>(s.kv_logical_tokens));
  prefix_blocks_.Set(s.prefix_cache_blocks);
  prefix_idle_blocks_.Set(s.prefix_cache_idle_blocks);
  step_batch_.Set(s.last_step_batch);
  step_tokens_.Set(s.last_step_tokens);
  engine_broken_.Set(s.broken ? 1 : 0);
  step_running_.Set(s.step_running_seconds);
  MutexLock lock(&mu_);
  const EngineTotals& t = s.totals;
  Advance(prompt_tokens_, t.prompt_tokens, &last_.prompt_tokens);
  Advance(generation_tokens_, t.generation_tokens, &last_.generation_tokens);
  Advance(preemptions_, t.preemptions, &last_.preemptions);
  Advance(evictions_, t.evictions, &last_.evictions);
  Advance(evicted_tokens_, t.evicted_tokens, &last_.evicted_tokens);
  Advance(steps_, t.steps, &last_.steps);
  Advance(prefix_queries_, t.prefix_queries, &last_.prefix_queries);
  Advance(prefix_hits_, t.prefix_hits, &last_.prefix_hits);
}

std::string ServerMetrics::Render(const LoopStats& stats) {
  Refresh(stats);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace beacon
