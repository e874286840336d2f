// beacon-serve's Prometheus metrics (prometheus-cpp), served as text at
// /metrics on the HTTP port. docs/observability.md explains each one.
//
// Names carry the `beacon_` prefix and follow Prometheus conventions (base
// units, `_seconds`, `_total`); their meaning follows vLLM's metrics and the
// Kubernetes Gateway API Inference Extension's model-server protocol (queue
// length: beacon_num_requests_waiting; KV utilisation:
// beacon_kv_cache_usage_perc, a 0..1 fraction as vLLM's gpu_cache_usage_perc).
//
// Counters of tokens, evictions and preemptions are advanced from the
// engine's own totals at each scrape, so they agree exactly with the
// engine's accounting; latencies are observed as they happen (EngineObserver).
//
// Thread-safety: every method may be called from any thread.
#ifndef BEACON_SERVER_METRICS_H_
#define BEACON_SERVER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "kv/kv_policy.h"
#include "server/engine_loop.h"
#include "server/engine_observer.h"
#include "util/mutex.h"

namespace beacon {

// What the info metric (beacon_server_info) reports.
struct MetricsInfo {
  std::string model;
  std::string architecture;
  int32_t block_size = 16;
  int64_t pool_tokens = 0;
  int64_t kv_bytes_per_token = 0;       // K+V bytes of one token slot, all layers
  std::string kv_cache_dtype = "bf16";  // element type of K and V ("f32", "bf16", "q8_0")
  KvPolicyKind default_policy = KvPolicyKind::kFull;
  int32_t default_budget = 0;
  std::string admission;
};

class ServerMetrics : public EngineObserver {
 public:
  explicit ServerMetrics(const MetricsInfo& info);

  // EngineObserver (engine thread).
  void OnFirstToken(double seconds) override;
  void OnInterToken(double seconds) override;
  void OnFinish(const StreamFinal& final) override;
  void OnRejected(const absl::Status& status) override;
  void OnStep(const StepReport& report, double seconds) override;

  // A request refused by the front end before it reached the engine
  // (invalid input, draining, authentication), by gRPC/absl status code.
  void OnFrontEndRejected(const absl::Status& status);

  // The Prometheus text exposition of every metric, gauges refreshed from
  // `stats` first.
  std::string Render(const LoopStats& stats) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Refresh(const LoopStats& stats) ABSL_LOCKS_EXCLUDED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  // Gauges.
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* blocks_total_;
  prometheus::Gauge* blocks_used_;
  prometheus::Gauge* blocks_free_;
  prometheus::Gauge* blocks_reserved_;
  prometheus::Gauge* usage_perc_;
  prometheus::Gauge* compressing_;
  prometheus::Gauge* cached_tokens_;
  prometheus::Gauge* logical_tokens_;
  prometheus::Gauge* prefix_blocks_;
  prometheus::Gauge* prefix_idle_blocks_;
  prometheus::Gauge* step_batch_;
  prometheus::Gauge* step_tokens_;
  // Counters (advanced from engine totals).
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* evictions_;
  prometheus::Counter* evicted_tokens_;
  prometheus::Counter* steps_;
  prometheus::Counter* prefix_queries_;
  prometheus::Counter* prefix_hits_;
  prometheus::Family<prometheus::Counter>* finished_;
  prometheus::Family<prometheus::Counter>* rejected_;
  // Histograms.
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* tpot_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_;
  // beacon_engine_step_seconds by kind, resolved once: OnStep runs every step.
  prometheus::Histogram* step_decode_;
  prometheus::Histogram* step_prefill_;
  prometheus::Histogram* step_mixed_;
  prometheus::Histogram* peak_kv_tokens_;
  prometheus::Histogram* compression_ratio_;

  Mutex mu_;
  EngineTotals last_ ABSL_GUARDED_BY(mu_);  // the engine totals the counters were last advanced to
};

}  // namespace beacon

#endif  // BEACON_SERVER_METRICS_H_
