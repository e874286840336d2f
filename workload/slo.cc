#include "workload/slo.h"

#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace beacon::workload {

std::string Slo::ToString() const {
  std::vector<std::string> parts;
  if (ttft_ms) parts.push_back(absl::StrCat("ttft_ms=", *ttft_ms));
  if (tpot_ms) parts.push_back(absl::StrCat("tpot_ms=", *tpot_ms));
  if (e2e_ms) parts.push_back(absl::StrCat("e2e_ms=", *e2e_ms));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<Slo> ParseSlo(absl::string_view spec) {
  Slo slo;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError("--slo: empty (expected e.g. ttft_ms=500,tpot_ms=50,e2e_ms=20000)");
  }
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--slo: '", item, "' is not KEY=VALUE"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, eq));
    const absl::string_view val = absl::StripAsciiWhitespace(item.substr(eq + 1));
    std::optional<double>* slot = key == "ttft_ms"   ? &slo.ttft_ms
                                  : key == "tpot_ms" ? &slo.tpot_ms
                                  : key == "e2e_ms"  ? &slo.e2e_ms
                                                     : nullptr;
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo: unknown key '", key, "' (known: ttft_ms, tpot_ms, e2e_ms)"));
    }
    if (slot->has_value()) return absl::InvalidArgumentError(absl::StrCat("--slo: '", key, "' given twice"));
    double v;
    if (!absl::SimpleAtod(val, &v) || !std::isfinite(v) || !(v > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo: ", key, " must be a positive number of milliseconds, got '", val, "'"));
    }
    *slot = v;
  }
  return slo;
}

}  // namespace beacon::workload
