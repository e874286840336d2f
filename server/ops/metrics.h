// beacon-serve's Prometheus metrics (prometheus-cpp), served as text at
// /metrics on the HTTP port. docs/observability.md explains each one.
//
// Names carry the `beacon_` prefix and follow Prometheus conventions (base
// units, `_seconds`, `_total`); their meaning follows vLLM's metrics and the
// Kubernetes Gateway API Inference Extension's model-server protocol (queue
// length: beacon_num_requests_waiting; KV utilisation:
// beacon_kv_cache_usage_perc, a 0..1 fraction as vLLM's kv_cache_usage_perc,
// counting admission's reservations: max(used, reserved) / pool). Under
// MetricsNaming::kVllm the families vLLM also has answer to vLLM's names
// (metric_names.h, the one table of names). Every series carries
// `model_name`, the served model name, as vLLM's do.
//
// Counters of tokens, evictions and preemptions are advanced from the
// engine's own totals at each scrape, so they agree exactly with the
// engine's accounting; latencies are observed as they happen (EngineObserver).
//
// Thread-safety: every method may be called from any thread.
#ifndef BEACON_SERVER_OPS_METRICS_H_
#define BEACON_SERVER_OPS_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/serving/engine_loop.h"
#include "engine/serving/engine_observer.h"
#include "kv/policy/kv_policy.h"
#include "server/ops/metric_names.h"
#include "util/mutex.h"

namespace beacon {

// One measure exposed under each of its names (metric_names.h): an update
// goes to every one of them.
struct GaugeSet {
  std::vector<prometheus::Gauge*> each;
  void Set(double v) const;
};
struct CounterSet {
  std::vector<prometheus::Counter*> each;
  void Increment(double v = 1) const;
};
struct HistogramSet {
  std::vector<prometheus::Histogram*> each;
  void Observe(double v) const;
};

// What the info metric (beacon_server_info) reports.
struct MetricsInfo {
  std::string model;
  std::string served_model_name;  // the model_name label of every series (the OpenAI API's model id)
  MetricsNaming naming = MetricsNaming::kBeacon;
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

  // Families under every exposed name of `names`, each series labelled with
  // model_name plus `labels` (metrics.cc).
  GaugeSet Gauge(const FamilyNames& names, const std::string& help, const prometheus::Labels& labels = {});
  CounterSet Counter(const FamilyNames& names, const std::string& help, const prometheus::Labels& labels = {});
  HistogramSet Histogram(const FamilyNames& names, const std::string& help,
                         const prometheus::Histogram::BucketBoundaries& buckets, const prometheus::Labels& labels = {});

  const MetricsNaming naming_;
  const std::string model_name_;
  std::shared_ptr<prometheus::Registry> registry_;
  // Gauges.
  GaugeSet running_, waiting_, blocks_total_, blocks_used_, blocks_free_, blocks_reserved_;
  GaugeSet usage_perc_;  // max(used, reserved) / pool
  GaugeSet used_perc_;   // used / pool
  GaugeSet compressing_, cached_tokens_, logical_tokens_, step_batch_, step_tokens_;
  GaugeSet engine_broken_, step_running_;
  GaugeSet prefix_blocks_, prefix_idle_blocks_;
  // Counters (advanced from engine totals).
  CounterSet prompt_tokens_, generation_tokens_, preemptions_, evictions_, evicted_tokens_, steps_;
  CounterSet prefix_queries_, prefix_hits_;
  std::map<std::string, CounterSet> finished_;  // by finished_reason label (naming_'s values)
  std::map<std::string, CounterSet> rejected_;  // by reason
  // Histograms.
  HistogramSet ttft_, itl_, tpot_, e2e_, queue_, prefill_, decode_, inference_;
  HistogramSet request_prompt_tokens_, request_generation_tokens_;
  // beacon_engine_step_seconds by kind, resolved once: OnStep runs every step.
  HistogramSet step_decode_, step_prefill_, step_mixed_;
  HistogramSet peak_kv_tokens_, compression_ratio_;

  Mutex mu_;
  EngineTotals last_ ABSL_GUARDED_BY(mu_);  // the engine totals the counters were last advanced to
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_METRICS_H_
