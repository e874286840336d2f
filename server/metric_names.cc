#include "server/metric_names.h"

#include "absl/strings/str_cat.h"

namespace beacon {

absl::StatusOr<MetricsNaming> ParseMetricsNaming(absl::string_view name) {
  if (name == "beacon") return MetricsNaming::kBeacon;
  if (name == "vllm") return MetricsNaming::kVllm;
  return absl::InvalidArgumentError(absl::StrCat("--metrics-prefix must be beacon or vllm, got '", name, "'"));
}

absl::string_view MetricsNamingName(MetricsNaming naming) { return naming == MetricsNaming::kVllm ? "vllm" : "beacon"; }

std::vector<std::string> ExposedNames(const FamilyNames& family, MetricsNaming naming) {
  if (naming == MetricsNaming::kBeacon || family.vllm.empty()) return {family.beacon};
  return std::vector<std::string>(family.vllm.begin(), family.vllm.end());
}

std::string FinishedReasonLabel(FinishReason reason, MetricsNaming naming) {
  if (naming == MetricsNaming::kBeacon) return std::string(FinishReasonName(reason));
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos:
    case FinishReason::kStop:
    case FinishReason::kStopSequence: return "stop";
    default: return "abort";  // time limit, cancellation, engine error: vLLM's aborted requests
  }
}

std::vector<std::string> FinishedReasonLabels(MetricsNaming naming) {
  if (naming == MetricsNaming::kVllm) return {"stop", "length", "abort"};
  std::vector<std::string> out;
  for (FinishReason f : {FinishReason::kStop, FinishReason::kLength, FinishReason::kEos, FinishReason::kStopSequence,
                         FinishReason::kTimeLimit, FinishReason::kCancelled, FinishReason::kError}) {
    out.emplace_back(FinishReasonName(f));
  }
  return out;
}

}  // namespace beacon
