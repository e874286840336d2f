// The metric naming table: which names a family is exposed under in each
// naming, vLLM's finished_reason values, and --metrics-prefix parsing.
#include "server/ops/metric_names.h"

#include <gtest/gtest.h>

#include <set>

namespace beacon {
namespace {

using ::std::string;
using ::std::vector;

TEST(MetricNamesTest, BeaconModeKeepsBeaconNames) {
  EXPECT_EQ(ExposedNames(metric_names::kNumRequestsRunning, MetricsNaming::kBeacon),
            vector<string>{"beacon_num_requests_running"});
  EXPECT_EQ(ExposedNames(metric_names::kKvCacheUsagePerc, MetricsNaming::kBeacon),
            vector<string>{"beacon_kv_cache_usage_perc"});
}

TEST(MetricNamesTest, VllmModeAnswersToEveryVllmNameAndKeepsOurOwn) {
  EXPECT_EQ(ExposedNames(metric_names::kNumRequestsRunning, MetricsNaming::kVllm),
            vector<string>{"vllm:num_requests_running"});
  EXPECT_EQ(ExposedNames(metric_names::kKvCacheUsagePerc, MetricsNaming::kVllm),
            (vector<string>{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}));
  EXPECT_EQ(ExposedNames(metric_names::kPreemptions, MetricsNaming::kVllm),
            vector<string>{"vllm:num_preemptions_total"});
  // vLLM has no such family: the beacon name stays.
  EXPECT_EQ(ExposedNames(metric_names::kKvBlocksReserved, MetricsNaming::kVllm),
            vector<string>{"beacon_kv_blocks_reserved"});
}

TEST(MetricNamesTest, FinishedReasonsFollowTheNaming) {
  EXPECT_EQ(FinishedReasonLabel(FinishReason::kEos, MetricsNaming::kBeacon), "eos");
  EXPECT_EQ(FinishedReasonLabel(FinishReason::kStopSequence, MetricsNaming::kBeacon), "stop_sequence");
  for (FinishReason f : {FinishReason::kStop, FinishReason::kEos, FinishReason::kStopSequence}) {
    EXPECT_EQ(FinishedReasonLabel(f, MetricsNaming::kVllm), "stop");
  }
  // A time limit is a limit, as OpenAI says too (tests/server/grpc/finish_reason_test.cc).
  for (FinishReason f : {FinishReason::kLength, FinishReason::kTimeLimit}) {
    EXPECT_EQ(FinishedReasonLabel(f, MetricsNaming::kVllm), "length");
  }
  for (FinishReason f : {FinishReason::kCancelled, FinishReason::kError}) {
    EXPECT_EQ(FinishedReasonLabel(f, MetricsNaming::kVllm), "abort");
  }
  // Every label a finish can produce is pre-created, in both namings.
  for (MetricsNaming n : {MetricsNaming::kBeacon, MetricsNaming::kVllm}) {
    const vector<string> all = FinishedReasonLabels(n);
    const std::set<string> labels(all.begin(), all.end());
    for (FinishReason f : kFinalFinishReasons) {
      EXPECT_TRUE(labels.count(FinishedReasonLabel(f, n))) << FinishReasonName(f);
    }
  }
  EXPECT_EQ(FinishedReasonLabels(MetricsNaming::kVllm).size(), 3u);
}

TEST(MetricNamesTest, ParsesThePrefixFlag) {
  EXPECT_EQ(*ParseMetricsNaming("beacon"), MetricsNaming::kBeacon);
  EXPECT_EQ(*ParseMetricsNaming("vllm"), MetricsNaming::kVllm);
  absl::StatusOr<MetricsNaming> bad = ParseMetricsNaming("sglang");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--metrics-prefix"), absl::string_view::npos);
}

}  // namespace
}  // namespace beacon
