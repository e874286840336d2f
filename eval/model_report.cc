#include "eval/model_report.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon::eval {
namespace {

// The columns every model table starts with, after any leading key columns.
std::vector<Column> ResultColumns() {
  return {{"policy", "policy", 0},
          {"budget", "budget", 0},
          {"kl", "KL (nats)", 4},
          {"top1", "top-1", 3},
          {"recall", "attn recall", 3},
          {"kl_post", "KL post", 4},
          {"top1_post", "top-1 post", 3},
          {"recall_post", "recall post", 3},
          {"agreement", "agree len", 0},
          {"peak_slots", "peak slots", 0},
          {"evictions", "evictions", 1},
          {"post_steps", "post steps", 0},
          {"kept_jaccard", "kept Jaccard vs twin", 4}};
}

std::vector<Cell> ResultCells(const ModelResult& r) {
  return {r.policy,
          static_cast<double>(r.budget),
          r.kl,
          r.top1,
          r.recall,
          NumberOrNone(r.kl_post),
          NumberOrNone(r.top1_post),
          NumberOrNone(r.recall_post),
          r.agreement,
          r.peak_slots,
          r.evictions,
          r.post_steps,
          NumberOrNone(r.kept_jaccard)};
}

int PrecisionOf(const std::string& key) {
  if (key == "kl_post") return 4;
  if (key == "agreement") return 0;
  return 3;
}

// "0.0463 [0.0321, 0.0610]" for the markdown pivots; "-" without data.
std::string WithInterval(const MeanInterval& m, int precision) {
  if (m.n == 0) return "-";
  return absl::StrFormat("%.*f [%.*f, %.*f]", precision, m.mean, precision, m.ci.lo, precision, m.ci.hi);
}

ResultTable SummaryTable(const ModelEvalReport& report, const ModelReportOptions& o) {
  std::vector<Column> cols = ResultColumns();
  for (const ModelMetric& m : IntervalMetrics()) {
    const int p = PrecisionOf(m.key);
    cols.push_back({absl::StrCat(m.key, "_lo"), absl::StrCat(m.key, " lo"), p});
    cols.push_back({absl::StrCat(m.key, "_hi"), absl::StrCat(m.key, " hi"), p});
    cols.push_back({absl::StrCat(m.key, "_n"), absl::StrCat(m.key, " prompts"), 0});
    cols.push_back({absl::StrCat(m.key, "_95"), absl::StrCat(m.key, " [95%]"), 0});
  }
  ResultTable table(std::move(cols));
  for (size_t c = 0; c < report.results.size(); ++c) {
    std::vector<Cell> cells = ResultCells(report.results[c]);
    for (const ModelMetric& m : IntervalMetrics()) {
      const MeanInterval mi = PromptInterval(report.prompts, c, m, o.resamples, o.seed);
      // One insert of copies: GCC 12 warns (-Wmaybe-uninitialized, a false
      // positive) on a push_back of a moved std::variant here.
      const Cell extra[] = {NumberOrNone(mi.ci.lo), NumberOrNone(mi.ci.hi), Cell(static_cast<double>(mi.n)),
                            Cell(WithInterval(mi, PrecisionOf(m.key)))};
      cells.insert(cells.end(), std::begin(extra), std::end(extra));
    }
    table.AddRow(std::move(cells));
  }
  return table;
}

ResultTable PerPromptTable(const ModelEvalReport& report) {
  std::vector<Column> cols = {{"prompt", "prompt", 0}};
  for (Column& c : ResultColumns()) cols.push_back(std::move(c));
  ResultTable table(std::move(cols));
  for (const PromptSummary& p : report.prompts) {
    for (const ModelResult& r : p.results) {
      std::vector<Cell> cells = {p.id};
      for (Cell& c : ResultCells(r)) cells.push_back(std::move(c));
      table.AddRow(std::move(cells));
    }
  }
  return table;
}

ResultTable ComparisonTable(const std::vector<PairedDifference>& diffs) {
  // Keyed (other policy, budget) first so that PivotMarkdown can lay the
  // verdicts out as policy x budget.
  ResultTable table({{"policy", "vs policy", 0},
                     {"budget", "budget", 0},
                     {"metric", "metric", 0},
                     {"subject", "subject", 0},
                     {"diff", "mean diff", 4},
                     {"lo", "lo", 4},
                     {"hi", "hi", 4},
                     {"n", "prompts", 0},
                     {"verdict", "verdict", 0}});
  for (const PairedDifference& d : diffs) {
    table.AddRow({d.other, static_cast<double>(d.budget), d.metric, d.subject, NumberOrNone(d.diff.mean),
                  NumberOrNone(d.diff.ci.lo), NumberOrNone(d.diff.ci.hi), static_cast<double>(d.diff.n), d.verdict});
  }
  return table;
}

// The comparison of one metric as a policy x budget pivot of
// "verdict (diff [lo, hi])".
std::string ComparisonMarkdown(const std::vector<PairedDifference>& diffs, const std::string& metric) {
  ResultTable t({{"policy", "vs policy", 0}, {"budget", "budget", 0}, {"cell", "cell", 0}});
  for (const PairedDifference& d : diffs) {
    if (d.metric != metric) continue;
    const int p = PrecisionOf(metric);
    t.AddRow({d.other, static_cast<double>(d.budget), absl::StrCat(d.verdict, " ", WithInterval(d.diff, p))});
  }
  return t.PivotMarkdown("policy", "budget", "cell");
}

}  // namespace

ModelReportTables BuildModelReport(const ModelEvalReport& report, const ModelReportOptions& options,
                                   const std::string& heading) {
  const std::vector<PairedDifference> diffs =
      CompareWithPaired(report.prompts, options.subject, options.resamples, options.seed);
  ModelReportTables out{SummaryTable(report, options), PerPromptTable(report), ComparisonTable(diffs), ""};

  std::string& md = out.markdown;
  md = absl::StrCat("# beacon-eval model\n\n", heading, "\n\n");
  md +=
      "| prompt | prompt tokens | distinct 4-grams | trace s | replay s | ref mismatches | agreement mismatches | "
      "reused |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const PromptSummary& p : report.prompts) {
    absl::StrAppendFormat(&md, "| %s | %d | %.2f | %.0f | %.0f | %d | %d | %s |\n", p.id, p.prompt_tokens,
                          p.distinct_4grams, p.trace_seconds, p.replay_seconds, p.reference_mismatches,
                          p.agreement_mismatches, p.reused ? "yes" : "no");
  }
  absl::StrAppendFormat(&md, "\nIntervals: 95%% percentile bootstrap over prompts, %d resamples, seed %d.\n",
                        options.resamples, options.seed);
  for (const auto& [key, title] : std::initializer_list<std::pair<const char*, const char*>>{
           {"kl_post_95", "Mean KL after the first eviction (nats) [95% interval]"},
           {"top1_post_95", "Top-1 agreement after the first eviction [95% interval]"},
           {"recall_post_95", "Attention-mass recall after the first eviction [95% interval]"},
           {"agreement_95", "Free-running greedy agreement length (tokens) [95% interval]"},
           {"kl", "Mean KL(full || policy), nats, all steps"},
           {"recall", "Attention-mass recall, all steps"}}) {
    absl::StrAppend(&md, "\n## ", title, "\n\n", out.summary.PivotMarkdown("policy", "budget", key));
  }
  for (const ModelMetric& m : IntervalMetrics()) {
    absl::StrAppend(&md, "\n## ", options.subject, " minus each policy: ", m.key,
                    m.higher_is_better ? " (higher is better)" : " (lower is better)",
                    ", paired over prompts [95% interval]\n\n", ComparisonMarkdown(diffs, m.key));
  }
  absl::StrAppend(&md, "\n## All metrics\n\n", out.summary.ToMarkdown());
  return out;
}

}  // namespace beacon::eval
