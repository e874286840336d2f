#include "eval/model_intervals.h"

#include <cmath>

namespace beacon::eval {
namespace {

MeanInterval IntervalOf(const std::vector<double>& x, int resamples, uint64_t seed) {
  MeanInterval out;
  out.n = static_cast<int>(x.size());
  if (x.empty()) {
    out.mean = std::nan("");
    out.ci = Interval{std::nan(""), std::nan("")};
    return out;
  }
  double sum = 0.0;
  for (double v : x) sum += v;
  out.mean = sum / static_cast<double>(x.size());
  out.ci = BootstrapMeanInterval(x, resamples, seed);
  return out;
}

}  // namespace

const std::vector<ModelMetric>& IntervalMetrics() {
  static const std::vector<ModelMetric> metrics = {
      {"kl_post", &ModelResult::kl_post, false},
      {"top1_post", &ModelResult::top1_post, true},
      {"recall_post", &ModelResult::recall_post, true},
      {"agreement", &ModelResult::agreement, true},
  };
  return metrics;
}

MeanInterval PromptInterval(const std::vector<PromptSummary>& prompts, size_t c, const ModelMetric& metric,
                            int resamples, uint64_t seed) {
  std::vector<double> x;
  for (const PromptSummary& p : prompts) {
    const double v = p.results[c].*metric.field;
    if (!std::isnan(v)) x.push_back(v);
  }
  return IntervalOf(x, resamples, seed);
}

std::vector<PairedDifference> CompareWithPaired(const std::vector<PromptSummary>& prompts, const std::string& subject,
                                                int resamples, uint64_t seed) {
  std::vector<PairedDifference> out;
  if (prompts.empty()) return out;
  const std::vector<ModelResult>& configs = prompts.front().results;
  for (size_t s = 0; s < configs.size(); ++s) {
    if (configs[s].policy != subject) continue;
    for (size_t o = 0; o < configs.size(); ++o) {
      if (o == s || configs[o].budget != configs[s].budget || configs[o].policy == subject) continue;
      for (const ModelMetric& m : IntervalMetrics()) {
        std::vector<double> d;
        for (const PromptSummary& p : prompts) {
          const double a = p.results[s].*m.field, b = p.results[o].*m.field;
          if (!std::isnan(a) && !std::isnan(b)) d.push_back(a - b);
        }
        PairedDifference pd{subject, configs[o].policy, configs[s].budget, m.key, IntervalOf(d, resamples, seed), "-"};
        if (pd.diff.n > 0) {
          const bool above = pd.diff.ci.lo > 0.0, below = pd.diff.ci.hi < 0.0;
          if (!above && !below) {
            pd.verdict = "tie";
          } else {
            pd.verdict = (above == m.higher_is_better) ? "win" : "lose";
          }
        }
        out.push_back(std::move(pd));
      }
    }
  }
  return out;
}

}  // namespace beacon::eval
