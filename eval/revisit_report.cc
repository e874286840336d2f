#include "eval/revisit_report.h"

#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "eval/metrics.h"

namespace beacon::eval {
namespace {

struct KindAcc {
  Mean exact, logprob, pairs, digits, exact_full_right;
  RevisitKindStats Stats() const {
    RevisitKindStats s;
    s.n = static_cast<int32_t>(exact.count());
    s.exact = exact.value();
    s.logprob = logprob.value();
    s.pairs_held = pairs.value();
    s.digits_held = digits.value();
    s.n_full_right = static_cast<int32_t>(exact_full_right.count());
    s.exact_where_full_right = exact_full_right.value();
    return s;
  }
};

std::string Cell(const RevisitCell& c) { return c.budget == 0 ? c.policy : absl::StrCat(c.policy, " ", c.budget); }

}  // namespace

std::vector<RevisitCell> SummarizeRevisit(const std::vector<RevisitCaseResult>& results) {
  std::vector<RevisitCell> cells;
  if (results.empty()) return cells;
  const size_t n_rows = results.front().rows.size();
  for (size_t i = 0; i < n_rows; ++i) {
    KindAcc rev, plain;
    Mean held_rev, held_plain, digits_rev, digits_plain, evictions, peak;
    for (const RevisitCaseResult& r : results) {
      const RevisitRow& row = r.rows[i];
      for (size_t a = 0; a < row.answers.size(); ++a) {
        const RevisitAnswer& ans = row.answers[a];
        KindAcc& k = ans.revisited ? rev : plain;
        k.exact.Add(ans.exact ? 1.0 : 0.0);
        k.logprob.Add(ans.logprob);
        k.pairs.Add(ans.pairs_held);
        k.digits.Add(ans.digits_held);
        if (r.rows.front().answers[a].exact) k.exact_full_right.Add(ans.exact ? 1.0 : 0.0);
      }
      held_rev.Add(row.held_revisited);
      held_plain.Add(row.held_plain);
      digits_rev.Add(row.digits_revisited);
      digits_plain.Add(row.digits_plain);
      evictions.Add(static_cast<double>(row.evictions));
      peak.Add(row.peak_slots - r.prompt_tokens);
    }
    RevisitCell c;
    c.policy = results.front().rows[i].policy;
    c.budget = results.front().rows[i].budget;
    c.revisited = rev.Stats();
    c.plain = plain.Stats();
    c.held_revisited = held_rev.value();
    c.held_plain = held_plain.value();
    c.digits_revisited = digits_rev.value();
    c.digits_plain = digits_plain.value();
    c.evictions = evictions.value();
    c.peak_generated = peak.value();
    cells.push_back(std::move(c));
  }
  return cells;
}

std::string RevisitMarkdown(const std::vector<RevisitCell>& cells, const std::vector<RevisitCaseResult>& results,
                            const std::string& heading) {
  std::string md = heading;
  if (results.empty()) return md + "\nNo case finished yet.\n";
  Mean prompt, gen, stretch;
  for (const RevisitCaseResult& r : results) {
    prompt.Add(r.prompt_tokens);
    gen.Add(r.generated_tokens);
    stretch.Add(r.stretch_tokens);
  }
  absl::StrAppendFormat(&md,
                        "\n%d cases; mean %.0f prompt tokens (kept by every policy), %.0f teacher-forced generated "
                        "tokens, of which %.0f between the last statement and the first question.\n",
                        static_cast<int>(results.size()), prompt.value(), gen.value(), stretch.value());
  absl::StrAppend(&md,
                  "\n## Answers\n\nexact: share of asked facts whose greedy continuation states the value; "
                  "log p: mean answer log-probability (nats, summed over its tokens); pairs: share of "
                  "(layer, KV head) pairs whose cache still holds every digit position of the asked value's "
                  "statement when the question comes.\n\n"
                  "| config | peak gen. slots | evictions | revisited exact | revisited log p | revisited pairs | "
                  "plain exact | plain log p | plain pairs |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const RevisitCell& c : cells) {
    absl::StrAppendFormat(&md, "| %s | %.0f | %.1f | %.2f (n=%d) | %.2f | %.3f | %.2f (n=%d) | %.2f | %.3f |\n",
                          Cell(c), c.peak_generated, c.evictions, c.revisited.exact, c.revisited.n, c.revisited.logprob,
                          c.revisited.pairs_held, c.plain.exact, c.plain.n, c.plain.logprob, c.plain.pairs_held);
  }
  absl::StrAppend(&md,
                  "\n## Every fact's positions at the first question\n\nShare of (layer, KV head) pairs holding "
                  "every digit of a fact's value (pairs) and mean share of its digit positions a pair holds "
                  "(digits), averaged over all revisited and all never-revisited facts of a case (not only the "
                  "asked ones); and exact answers among the facts the full cache answers exactly.\n\n"
                  "| config | revisited pairs | revisited digits | plain pairs | plain digits | revisited exact "
                  "where full right | plain exact where full right |\n|---|---|---|---|---|---|---|\n");
  for (const RevisitCell& c : cells) {
    absl::StrAppendFormat(&md, "| %s | %.3f | %.3f | %.3f | %.3f | %.2f (n=%d) | %.2f (n=%d) |\n", Cell(c),
                          c.held_revisited, c.digits_revisited, c.held_plain, c.digits_plain,
                          c.revisited.exact_where_full_right, c.revisited.n_full_right, c.plain.exact_where_full_right,
                          c.plain.n_full_right);
  }
  return md;
}

nlohmann::json RevisitJson(const std::vector<RevisitCell>& cells, const std::vector<RevisitCaseResult>& results) {
  auto kind = [](const RevisitKindStats& k) {
    return nlohmann::json{{"n", k.n},
                          {"exact", k.exact},
                          {"logprob", k.logprob},
                          {"pairs_held", k.pairs_held},
                          {"digits_held", k.digits_held},
                          {"n_full_right", k.n_full_right},
                          {"exact_where_full_right", k.exact_where_full_right}};
  };
  nlohmann::json out = {{"cells", nlohmann::json::array()}, {"cases", nlohmann::json::array()}};
  for (const RevisitCell& c : cells) {
    out["cells"].push_back({{"policy", c.policy},
                            {"budget", c.budget},
                            {"revisited", kind(c.revisited)},
                            {"plain", kind(c.plain)},
                            {"held_revisited", c.held_revisited},
                            {"held_plain", c.held_plain},
                            {"digits_revisited", c.digits_revisited},
                            {"digits_plain", c.digits_plain},
                            {"evictions", c.evictions},
                            {"peak_generated_slots", c.peak_generated}});
  }
  for (const RevisitCaseResult& r : results) {
    nlohmann::json rows = nlohmann::json::array();
    for (const RevisitRow& row : r.rows) {
      nlohmann::json answers = nlohmann::json::array();
      for (const RevisitAnswer& a : row.answers) {
        answers.push_back({{"fact", a.fact},
                           {"revisited", a.revisited},
                           {"logprob", a.logprob},
                           {"exact", a.exact},
                           {"greedy", a.greedy},
                           {"pairs_held", a.pairs_held},
                           {"digits_held", a.digits_held}});
      }
      rows.push_back({{"policy", row.policy},
                      {"budget", row.budget},
                      {"answers", answers},
                      {"held_revisited", row.held_revisited},
                      {"held_plain", row.held_plain},
                      {"digits_revisited", row.digits_revisited},
                      {"digits_plain", row.digits_plain},
                      {"evictions", row.evictions},
                      {"peak_slots", row.peak_slots}});
    }
    out["cases"].push_back({{"id", r.id},
                            {"prompt_tokens", r.prompt_tokens},
                            {"generated_tokens", r.generated_tokens},
                            {"stretch_tokens", r.stretch_tokens},
                            {"values", r.values},
                            {"revisited", r.revisited},
                            {"seconds", r.seconds},
                            {"rows", rows}});
  }
  return out;
}

absl::Status RunRevisitToFiles(Runtime* rt, const RevisitOptions& o, const std::string& model,
                               const std::string& command, const std::string& dir, std::FILE* log) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RevisitCaseResult> results;
  auto write_file = [&](const std::string& name, const std::string& text) -> absl::Status {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.good()) return absl::InternalError(absl::StrCat("cannot write ", path));
    return absl::OkStatus();
  };
  auto write = [&](bool complete) -> absl::Status {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<RevisitCell> cells = SummarizeRevisit(results);
    nlohmann::json j = RevisitJson(cells, results);
    j["settings"] = {{"model", model},
                     {"command", command},
                     {"complete", complete},
                     {"seconds", seconds},
                     {"threads", rt->pool()->n_threads()},
                     {"seed", o.seed},
                     {"cases", o.cases},
                     {"budgets", o.budgets},
                     {"policies", o.policies},
                     {"interval", o.interval},
                     {"facts", o.shape.facts},
                     {"revisited", o.shape.revisited},
                     {"revisits_per_fact", o.shape.revisits_per_fact},
                     {"steps", o.shape.steps}};
    const std::string heading = absl::StrFormat(
        "# beacon-eval revisit%s\n\nmodel %s, seed %d, interval %d, one decode step per token; %d facts, %d revisited "
        "%d times "
        "each over %d counting steps; %.0f s on %d threads\n\n`%s`\n",
        complete ? "" : " (PARTIAL: run still going or stopped early)", model, o.seed, o.interval, o.shape.facts,
        o.shape.revisited, o.shape.revisits_per_fact, o.shape.steps, seconds, rt->pool()->n_threads(), command);
    if (absl::Status s = write_file("revisit.md", RevisitMarkdown(cells, results, heading)); !s.ok()) return s;
    return write_file("revisit.json", j.dump(1) + "\n");
  };
  absl::Status written;
  const absl::Status run = RunRevisitEval(rt, o, log, [&](const RevisitCaseResult& r) {
    results.push_back(r);
    if (written.ok()) written = write(false);
  });
  if (!run.ok()) return run;
  if (!written.ok()) return written;
  return write(true);
}

}  // namespace beacon::eval
