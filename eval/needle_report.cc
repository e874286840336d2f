#include "eval/needle_report.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon::eval {
namespace {

using Config = std::pair<std::string, int32_t>;  // (policy, budget)

// Configurations in the order the rows give them (the full cache first).
std::vector<Config> ConfigsOf(const std::vector<NeedleCaseResult>& results) {
  std::vector<Config> out;
  for (const NeedleCaseResult& r : results) {
    for (const NeedleRow& row : r.rows) {
      const Config c{row.policy, row.budget};
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  }
  return out;
}

// The rows of one configuration at one D, in case order.
std::vector<const NeedleRow*> RowsOf(const std::vector<NeedleCaseResult>& results, int32_t distance, const Config& c) {
  std::vector<const NeedleRow*> out;
  for (const NeedleCaseResult& r : results) {
    if (r.distance != distance) continue;
    for (const NeedleRow& row : r.rows) {
      if (row.policy == c.first && row.budget == c.second) out.push_back(&row);
    }
  }
  return out;
}

std::string Label(const std::string& policy, int32_t budget) {
  return policy == "full" ? policy : absl::StrCat(policy, "@", budget);
}

}  // namespace

NeedleSummary SummarizeNeedle(const std::vector<NeedleCaseResult>& results, const std::vector<int32_t>& distances,
                              int resamples, uint64_t seed) {
  NeedleSummary s;
  const std::vector<Config> configs = ConfigsOf(results);
  for (int32_t d : distances) {
    NeedleCalibration cal;
    cal.distance = d;
    for (const NeedleCaseResult& r : results) {
      if (r.distance != d) continue;
      ++cal.tried;
      cal.kept += r.kept;
      cal.full_wrong += r.status == "full cache wrong";
      cal.filler_restates += r.status == "filler restates the answer";
      cal.inconsistent += r.kept && !r.full_consistent;
    }
    s.calibration.push_back(cal);

    std::map<Config, std::vector<double>> outcomes;  // per configuration, per kept case
    for (const Config& c : configs) {
      const std::vector<const NeedleRow*> rows = RowsOf(results, d, c);
      if (rows.empty()) continue;
      NeedleCell cell;
      cell.policy = c.first;
      cell.budget = c.second;
      cell.distance = d;
      cell.cases = static_cast<int>(rows.size());
      std::vector<double>& x = outcomes[c];
      double evictions = 0;
      for (const NeedleRow* row : rows) {
        x.push_back(row->success ? 1.0 : 0.0);
        cell.successes += row->success;
        cell.evicted_cases += row->evictions > 0;
        evictions += static_cast<double>(row->evictions);
      }
      cell.rate = static_cast<double>(cell.successes) / cell.cases;
      cell.bootstrap = BootstrapMeanInterval(x, resamples, seed);
      cell.wilson = WilsonInterval(cell.successes, cell.cases);
      cell.mean_evictions = evictions / cell.cases;
      s.cells.push_back(cell);
    }
    // Beacon against each other compressing policy at the same budget.
    for (const Config& b : configs) {
      if (b.first != "beacon" || !outcomes.count(b)) continue;
      for (const Config& o : configs) {
        if (o.second != b.second || o.first == "beacon" || o.first == "full" || !outcomes.count(o)) continue;
        const std::vector<double>& xb = outcomes[b];
        const std::vector<double>& xo = outcomes[o];
        std::vector<double> diff(xb.size());
        for (size_t i = 0; i < diff.size(); ++i) diff[i] = xb[i] - xo[i];
        NeedleComparison cmp;
        cmp.other = o.first;
        cmp.budget = b.second;
        cmp.distance = d;
        cmp.cases = static_cast<int>(diff.size());
        double sum = 0;
        for (double v : diff) sum += v;
        cmp.difference = sum / static_cast<double>(diff.size());
        cmp.bootstrap = BootstrapMeanInterval(diff, resamples, seed);
        int evicted = 0;
        for (const NeedleCell& c : s.cells) {
          if (c.distance == d && c.budget == b.second && (c.policy == "beacon" || c.policy == o.first)) {
            evicted += c.evicted_cases;
          }
        }
        cmp.verdict = evicted == 0             ? "= full"
                      : cmp.bootstrap.lo > 0.0 ? "wins"
                      : cmp.bootstrap.hi < 0.0 ? "loses"
                                               : "ties";
        s.comparisons.push_back(cmp);
      }
    }
  }
  return s;
}

ResultTable NeedleRawTable(const std::vector<NeedleCaseResult>& results) {
  ResultTable t({{"case", "case", 0},
                 {"distance", "D", 0},
                 {"kind", "kind", 0},
                 {"answer", "answer", 0},
                 {"policy", "policy", 0},
                 {"budget", "budget", 0},
                 {"success", "success", 0},
                 {"evictions", "evictions", 0},
                 {"ran", "ran", 0},
                 {"generated", "generated", 0}});
  for (const NeedleCaseResult& r : results) {
    for (const NeedleRow& row : r.rows) {
      t.AddRow({static_cast<double>(r.id), static_cast<double>(r.distance), std::string(FactKindName(r.kind)), r.answer,
                row.policy, static_cast<double>(row.budget), row.success ? 1.0 : 0.0,
                static_cast<double>(row.evictions), row.ran ? 1.0 : 0.0, row.generated});
    }
  }
  return t;
}

ResultTable NeedleCellTable(const NeedleSummary& s) {
  ResultTable t({{"policy", "policy", 0},
                 {"budget", "budget", 0},
                 {"distance", "D", 0},
                 {"cases", "cases", 0},
                 {"successes", "successes", 0},
                 {"rate", "rate", 3},
                 {"boot_lo", "bootstrap lo", 3},
                 {"boot_hi", "bootstrap hi", 3},
                 {"wilson_lo", "Wilson lo", 3},
                 {"wilson_hi", "Wilson hi", 3},
                 {"evicted_cases", "evicted cases", 0},
                 {"mean_evictions", "mean evictions", 2}});
  for (const NeedleCell& c : s.cells) {
    t.AddRow({c.policy, static_cast<double>(c.budget), static_cast<double>(c.distance), static_cast<double>(c.cases),
              static_cast<double>(c.successes), c.rate, c.bootstrap.lo, c.bootstrap.hi, c.wilson.lo, c.wilson.hi,
              static_cast<double>(c.evicted_cases), c.mean_evictions});
  }
  return t;
}

ResultTable NeedleCalibrationTable(const NeedleSummary& s) {
  ResultTable t({{"distance", "D", 0},
                 {"tried", "cases tried", 0},
                 {"kept", "kept (full cache right)", 0},
                 {"full_wrong", "full cache wrong", 0},
                 {"filler_restates", "filler restates the answer", 0},
                 {"inconsistent", "batch full != pass 1", 0}});
  for (const NeedleCalibration& c : s.calibration) {
    t.AddRow({static_cast<double>(c.distance), static_cast<double>(c.tried), static_cast<double>(c.kept),
              static_cast<double>(c.full_wrong), static_cast<double>(c.filler_restates),
              static_cast<double>(c.inconsistent)});
  }
  return t;
}

nlohmann::json NeedleCasesJson(const std::vector<NeedleCaseResult>& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const NeedleCaseResult& r : results) {
    out.push_back({{"case", r.id},
                   {"distance", r.distance},
                   {"kind", FactKindName(r.kind)},
                   {"answer", r.answer},
                   {"status", r.status},
                   {"full_answer", r.full_text},
                   {"full_consistent", r.full_consistent},
                   {"prompt_tokens", r.prompt_tokens},
                   {"total_tokens", r.total_tokens},
                   {"full_seconds", r.full_seconds},
                   {"batch_seconds", r.batch_seconds},
                   {"filler_distinct_4grams", r.filler_distinct_4grams},
                   {"filler", r.filler_text}});
  }
  return out;
}

std::string NeedleMarkdown(const NeedleSummary& s, const std::string& heading) {
  std::string md = heading;
  absl::StrAppend(&md, "\n## Calibration (full cache alone)\n\n", NeedleCalibrationTable(s).ToMarkdown());
  std::vector<int32_t> budgets, distances;
  std::vector<std::string> policies;
  for (const NeedleCell& c : s.cells) {
    if (c.policy != "full" && std::find(budgets.begin(), budgets.end(), c.budget) == budgets.end()) {
      budgets.push_back(c.budget);
    }
    if (std::find(distances.begin(), distances.end(), c.distance) == distances.end()) distances.push_back(c.distance);
    if (std::find(policies.begin(), policies.end(), c.policy) == policies.end()) policies.push_back(c.policy);
  }
  auto find = [&](const std::string& p, int32_t b, int32_t d) -> const NeedleCell* {
    for (const NeedleCell& c : s.cells) {
      if (c.policy == p && (p == "full" || c.budget == b) && c.distance == d) return &c;
    }
    return nullptr;
  };
  for (int32_t b : budgets) {
    absl::StrAppend(&md, "\n## Success rate, budget ", b,
                    " (rate [95% bootstrap interval], successes/cases (W: 95% Wilson interval); \"= full\": never "
                    "evicted)\n\n| policy |");
    std::string rule = "| --- |";
    for (int32_t d : distances) {
      absl::StrAppend(&md, " D=", d, " |");
      rule += " ---: |";
    }
    absl::StrAppend(&md, "\n", rule, "\n");
    for (const std::string& p : policies) {
      md += absl::StrCat("| ", Label(p, b), " |");
      for (int32_t d : distances) {
        const NeedleCell* c = find(p, b, d);
        if (c == nullptr) {
          md += " - |";
        } else if (p != "full" && c->evicted_cases == 0) {
          absl::StrAppendFormat(&md, " = full (%d/%d) |", c->successes, c->cases);
        } else {
          absl::StrAppendFormat(&md, " %.2f [%.2f, %.2f] %d/%d (W %.2f-%.2f) |", c->rate, c->bootstrap.lo,
                                c->bootstrap.hi, c->successes, c->cases, c->wilson.lo, c->wilson.hi);
        }
      }
      md += "\n";
    }
  }
  if (!s.comparisons.empty()) {
    md +=
        "\n## Beacon minus each policy, paired over cases (95% bootstrap interval of the difference)\n\n"
        "| budget | D | vs | cases | beacon - other | interval | verdict |\n"
        "| ---: | ---: | --- | ---: | ---: | --- | --- |\n";
    for (const NeedleComparison& c : s.comparisons) {
      absl::StrAppendFormat(&md, "| %d | %d | %s | %d | %+.2f | [%+.2f, %+.2f] | %s |\n", c.budget, c.distance, c.other,
                            c.cases, c.difference, c.bootstrap.lo, c.bootstrap.hi, c.verdict);
    }
  }
  return md;
}

}  // namespace beacon::eval
