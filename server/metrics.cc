#include "server/metrics.h"

#include <prometheus/text_serializer.h>

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
void Advance(prometheus::Counter* c, int64_t now, int64_t* seen) {
  if (now <= *seen) return;
  c->Increment(static_cast<double>(now - *seen));
  *seen = now;
}

}  // namespace

ServerMetrics::ServerMetrics(const MetricsInfo& info) : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  BuildGauge()
      .Name("beacon_server_info")
      .Help("Constant 1; the labels describe the served model and the KV configuration")
      .Register(r)
      .Add({{"model", info.model},
            {"architecture", info.architecture},
            {"kv_block_size", std::to_string(info.block_size)},
            {"kv_pool_tokens", std::to_string(info.pool_tokens)},
            {"kv_cache_dtype", info.kv_cache_dtype},
            {"kv_policy", std::string(KvPolicyName(info.default_policy))},
            {"kv_budget", std::to_string(info.default_budget)},
            {"admission", info.admission}})
      .Set(1);
  auto gauge = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(r).Add({});
  };
  running_ = gauge("beacon_num_requests_running", "Requests in the running batch (prefilling or decoding)");
  waiting_ = gauge("beacon_num_requests_waiting", "Requests queued for admission (preempted ones included)");
  blocks_total_ = gauge("beacon_kv_pool_blocks", "KV cache blocks in the pool");
  blocks_used_ = gauge("beacon_kv_blocks_used", "KV cache blocks holding data");
  blocks_free_ = gauge("beacon_kv_blocks_free", "KV cache blocks free");
  blocks_reserved_ = gauge("beacon_kv_blocks_reserved", "KV cache blocks reserved by admission (reserve mode)");
  usage_perc_ = gauge("beacon_kv_cache_usage_perc", "Fraction of KV cache blocks in use (0..1)");
  compressing_ = gauge("beacon_num_requests_compressing", "Running requests whose KV policy evicts");
  cached_tokens_ = gauge("beacon_kv_cached_tokens", "KV slots held by live requests");
  logical_tokens_ =
      gauge("beacon_kv_logical_tokens", "KV slots live requests would hold without eviction (their token positions)");
  gauge("beacon_kv_bytes_per_token", "Bytes of K and V for one token slot, all layers")
      ->Set(static_cast<double>(info.kv_bytes_per_token));
  prefix_blocks_ = gauge("beacon_prefix_cache_blocks", "KV blocks indexed by the prefix cache (held or idle)");
  prefix_idle_blocks_ = gauge("beacon_prefix_cache_idle_blocks",
                              "Prefix-cache blocks no request holds: reusable, counted free, reclaimed LRU");
  step_batch_ = gauge("beacon_engine_step_batch_size", "Sequences in the last engine step");
  step_tokens_ = gauge("beacon_engine_step_tokens", "Tokens (prefill + decode) in the last engine step");

  auto counter = [&](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  prompt_tokens_ =
      counter("beacon_prompt_tokens_total",
              "Prompt tokens prefilled, computed or reused from the prefix cache (recomputation included)");
  generation_tokens_ = counter("beacon_generation_tokens_total", "Tokens generated (sampled)");
  preemptions_ = counter("beacon_preemptions_total", "Sequences preempted (KV freed, recomputed later)");
  evictions_ = counter("beacon_kv_evictions_total", "KV eviction rounds (a sequence compressing its cache)");
  evicted_tokens_ = counter("beacon_kv_evicted_tokens_total", "KV slots evicted, per KV head, summed over rounds");
  steps_ = counter("beacon_engine_steps_total", "Engine steps run");
  prefix_queries_ =
      counter("beacon_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache at admission");
  prefix_hits_ = counter("beacon_prefix_cache_hits_total", "Of those, tokens whose KV the prefix cache had");
  finished_ =
      &BuildCounter().Name("beacon_request_success_total").Help("Requests finished, by finish reason").Register(r);
  for (FinishReason f : {FinishReason::kStop, FinishReason::kLength, FinishReason::kEos, FinishReason::kStopSequence,
                         FinishReason::kTimeLimit, FinishReason::kCancelled, FinishReason::kError}) {
    finished_->Add({{"finished_reason", std::string(FinishReasonName(f))}});
  }
  rejected_ = &BuildCounter()
                   .Name("beacon_request_rejected_total")
                   .Help("Requests refused before running, by reason")
                   .Register(r);
  for (const char* reason : {"queue_full", "invalid", "draining", "unauthenticated", "other"}) {
    rejected_->Add({{"reason", reason}});
  }

  auto hist = [&](const char* name, const char* help, const prometheus::Histogram::BucketBoundaries& b) {
    return &BuildHistogram().Name(name).Help(help).Register(r).Add({}, b);
  };
  ttft_ = hist("beacon_time_to_first_token_seconds", "Arrival to first token", kLatency);
  itl_ = hist("beacon_inter_token_latency_seconds", "Time between consecutive tokens of a request", kPerToken);
  tpot_ =
      hist("beacon_time_per_output_token_seconds", "Per request: (end - first token) / (output tokens - 1)", kPerToken);
  e2e_ = hist("beacon_e2e_request_latency_seconds", "Arrival to finish", kLatency);
  queue_ = hist("beacon_request_queue_time_seconds", "Arrival to first scheduled step", kLatency);
  auto& steps = BuildHistogram()
                    .Name("beacon_engine_step_seconds")
                    .Help("Engine step duration, by kind: decode only, prefill only, or mixed")
                    .Register(r);
  step_decode_ = &steps.Add({{"kind", "decode"}}, kStep);
  step_prefill_ = &steps.Add({{"kind", "prefill"}}, kStep);
  step_mixed_ = &steps.Add({{"kind", "mixed"}}, kStep);
  peak_kv_tokens_ = hist("beacon_request_peak_kv_tokens", "Per request: most KV slots it held", kKvTokens);
  compression_ratio_ = hist("beacon_request_kv_compression_ratio",
                            "Per request: (prompt + output tokens) / peak KV slots; 1 = nothing evicted", kRatio);
}

void ServerMetrics::OnFirstToken(double s) { ttft_->Observe(s); }
void ServerMetrics::OnInterToken(double s) { itl_->Observe(s); }

void ServerMetrics::OnFinish(const StreamFinal& f) {
  finished_->Add({{"finished_reason", std::string(FinishReasonName(f.reason))}}).Increment();
  e2e_->Observe(f.total_seconds);
  queue_->Observe(f.queue_seconds);
  // TPOT of requests that ran to their natural end: a cancel or a deadline
  // would add the wait after the last token.
  const bool natural = f.reason == FinishReason::kStop || f.reason == FinishReason::kLength ||
                       f.reason == FinishReason::kEos || f.reason == FinishReason::kStopSequence;
  if (natural && f.completion_tokens > 1 && f.ttft_seconds > 0) {
    tpot_->Observe((f.total_seconds - f.ttft_seconds) / (f.completion_tokens - 1));
  }
  if (f.kv.peak_cached_tokens > 0) {
    peak_kv_tokens_->Observe(f.kv.peak_cached_tokens);
    compression_ratio_->Observe(static_cast<double>(f.prompt_tokens + f.completion_tokens) / f.kv.peak_cached_tokens);
  }
}

void ServerMetrics::OnRejected(const absl::Status& s) { OnFrontEndRejected(s); }

void ServerMetrics::OnFrontEndRejected(const absl::Status& s) {
  rejected_->Add({{"reason", RejectReason(s.code())}}).Increment();
}

void ServerMetrics::OnStep(const StepReport& report, double seconds) {
  if (!report.ran || !report.engine_status.ok()) return;
  (report.prefill_seqs == 0 ? step_decode_ : report.decode_seqs == 0 ? step_prefill_ : step_mixed_)->Observe(seconds);
}

void ServerMetrics::Refresh(const LoopStats& s) {
  running_->Set(s.running);
  waiting_->Set(s.waiting);
  blocks_total_->Set(s.kv_blocks_total);
  blocks_free_->Set(s.kv_blocks_free);
  blocks_used_->Set(s.kv_blocks_total - s.kv_blocks_free);
  blocks_reserved_->Set(s.kv_blocks_reserved);
  usage_perc_->Set(s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_total - s.kv_blocks_free) / s.kv_blocks_total
                                         : 0.0);
  compressing_->Set(s.compressing);
  cached_tokens_->Set(static_cast<double>(s.kv_cached_tokens));
  logical_tokens_->Set(static_cast<double>(s.kv_logical_tokens));
  prefix_blocks_->Set(s.prefix_cache_blocks);
  prefix_idle_blocks_->Set(s.prefix_cache_idle_blocks);
  step_batch_->Set(s.last_step_batch);
  step_tokens_->Set(s.last_step_tokens);
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
