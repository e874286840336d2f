#include "server/ops/metric_names.h"

#include <algorithm>
#include <utility>

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
  return std::string(naming == MetricsNaming::kVllm ? VllmFinishReason(reason) : FinishReasonName(reason));
}

std::vector<std::string> FinishedReasonLabels(MetricsNaming naming) {
  std::vector<std::string> out;
  for (FinishReason f : kFinalFinishReasons) {
    std::string label = FinishedReasonLabel(f, naming);
    if (std::find(out.begin(), out.end(), label) == out.end()) out.push_back(std::move(label));
  }
  return out;
}

}  // namespace beacon
