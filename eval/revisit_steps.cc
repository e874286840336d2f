#include "eval/revisit_steps.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/generation.h"
#include "eval/replay_batch.h"
#include "kv/policy/sequence_compressor.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f.good()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Per spec, the mean over traces of each trace's means (traces weigh alike;
// a trace without a revisit step for the spec's budget adds nothing to the
// revisit columns), written as markdown and JSON.
absl::Status WriteSummary(const RevisitStepsOptions& o, std::span<const PolicySpec> specs,
                          const std::vector<RevisitStepTrace>& traces, const std::vector<std::string>& dropped,
                          int32_t interval, bool complete) {
  std::string md = absl::StrFormat(
      "# beacon-eval revisit-steps%s\n\nThe replays of `%s` re-scored on revisit steps: the reference puts at "
      "least a threshold (%s) of its attention (mean over layers and query heads) on generated tokens older than "
      "budget + interval (interval %d). Traces with distinct-4-gram < %.2f dropped (%d: %s); %d kept traces "
      "replayed.\n\nPost: every step after the configuration's first eviction, on the kept traces. Revisit "
      "tables: means over the traces with at least one revisit step for that budget (n = such traces; steps = "
      "their revisit steps in all; share = of the post steps). Mean old mass: the reference's mass on generated "
      "tokens older than budget + interval, over the post steps.\n\n"
      "| config | post KL | post top-1 | post recall | mean old mass |\n|---|---|---|---|---|\n",
      complete ? "" : " (PARTIAL)", o.from, absl::StrJoin(o.thresholds, ", "), interval, o.min_distinct,
      static_cast<int>(dropped.size()), absl::StrJoin(dropped, ", "), static_cast<int>(traces.size()));
  nlohmann::json j = {{"from", o.from},
                      {"thresholds", o.thresholds},
                      {"min_distinct", o.min_distinct},
                      {"interval", interval},
                      {"dropped", dropped},
                      {"complete", complete},
                      {"configs", nlohmann::json::array()},
                      {"traces", nlohmann::json::array()}};
  const size_t n_thr = o.thresholds.size();
  std::vector<std::string> revisit_md(n_thr);
  for (size_t k = 0; k < n_thr; ++k) {
    revisit_md[k] = absl::StrFormat(
        "\n### Revisit steps at threshold %.2f\n\n| config | n | steps | share | revisit KL | revisit top-1 | "
        "revisit recall |\n|---|---|---|---|---|---|---|\n",
        o.thresholds[k]);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    Mean kl_post, top1_post, recall_post, old_mass;
    int64_t post_steps = 0;
    for (const RevisitStepTrace& t : traces) {
      const RevisitStepStats& s = t.stats[i];
      if (s.kl_post.count() > 0) {
        kl_post.Add(s.kl_post.value());
        top1_post.Add(s.top1_post.value());
        recall_post.Add(s.recall_post.value());
        post_steps += s.kl_post.count();
      }
      if (s.old_mass.count() > 0) old_mass.Add(s.old_mass.value());
    }
    const std::string name = absl::StrCat(specs[i].policy, "@", specs[i].budget);
    absl::StrAppendFormat(&md, "| %s | %.4f | %.3f | %.3f | %.3f |\n", name, kl_post.value(), top1_post.value(),
                          recall_post.value(), old_mass.value());
    nlohmann::json per_thr = nlohmann::json::array();
    for (size_t k = 0; k < n_thr; ++k) {
      Mean kl, top1, recall;
      int64_t steps = 0;
      for (const RevisitStepTrace& t : traces) {
        const RevisitStepStats& s = t.stats[i];
        if (s.kl[k].count() == 0) continue;
        kl.Add(s.kl[k].value());
        top1.Add(s.top1[k].value());
        recall.Add(s.recall[k].value());
        steps += s.kl[k].count();
      }
      const double share = post_steps > 0 ? static_cast<double>(steps) / static_cast<double>(post_steps) : 0.0;
      absl::StrAppendFormat(&revisit_md[k], "| %s | %d | %d | %.2f | %.4f | %.3f | %.3f |\n", name,
                            static_cast<int>(kl.count()), steps, share, kl.value(), top1.value(), recall.value());
      per_thr.push_back({{"threshold", o.thresholds[k]},
                         {"traces_with_revisit_steps", kl.count()},
                         {"revisit_steps", steps},
                         {"revisit_kl", kl.value()},
                         {"revisit_top1", top1.value()},
                         {"revisit_recall", recall.value()}});
    }
    j["configs"].push_back({{"config", name},
                            {"post_steps", post_steps},
                            {"post_kl", kl_post.value()},
                            {"post_top1", top1_post.value()},
                            {"post_recall", recall_post.value()},
                            {"old_mass", old_mass.value()},
                            {"revisit", per_thr}});
  }
  for (const std::string& r : revisit_md) md += r;
  for (const RevisitStepTrace& t : traces) {
    nlohmann::json per = nlohmann::json::array();
    for (size_t i = 0; i < specs.size(); ++i) {
      const RevisitStepStats& s = t.stats[i];
      nlohmann::json per_thr = nlohmann::json::array();
      for (size_t k = 0; k < n_thr; ++k) {
        per_thr.push_back({{"threshold", o.thresholds[k]},
                           {"revisit_steps", s.kl[k].count()},
                           {"revisit_kl", s.kl[k].value()},
                           {"revisit_top1", s.top1[k].value()},
                           {"revisit_recall", s.recall[k].value()}});
      }
      per.push_back({{"config", absl::StrCat(specs[i].policy, "@", specs[i].budget)},
                     {"revisit", per_thr},
                     {"post_steps", s.kl_post.count()},
                     {"post_kl", s.kl_post.value()},
                     {"post_top1", s.top1_post.value()},
                     {"post_recall", s.recall_post.value()},
                     {"old_mass", s.old_mass.value()}});
    }
    j["traces"].push_back({{"id", t.id},
                           {"distinct_4grams", t.distinct_4grams},
                           {"prompt_tokens", t.prompt_tokens},
                           {"trace_tokens", t.trace_tokens},
                           {"reference_mismatches", t.reference_mismatches},
                           {"seconds", t.seconds},
                           {"configs", per}});
  }
  absl::StrAppend(&md,
                  "\nReference mismatches per trace (steps where the re-encoded trace's next token is not the "
                  "reference's greedy choice):");
  for (const RevisitStepTrace& t : traces) absl::StrAppend(&md, " ", t.id, " ", t.reference_mismatches, ";");
  md += "\n";
  if (absl::Status s = WriteFile(o.out_dir + "/revisit_steps.md", md); !s.ok()) return s;
  return WriteFile(o.out_dir + "/revisit_steps.json", j.dump(1) + "\n");
}

}  // namespace

double ReferenceMass(const RecordingPolicy& ref, const PolicyModelInfo& m, int32_t begin, int32_t end) {
  if (end <= begin) return 0.0;
  double sum = 0.0;
  for (int l = 0; l < m.n_layers; ++l) {
    for (int h = 0; h < m.n_kv_heads; ++h) {
      for (int g = 0; g < m.group(); ++g) {
        const std::span<const float> p = ref.Probs(l, h, g);
        const int32_t e = std::min<int32_t>(end, static_cast<int32_t>(p.size()));
        for (int32_t s = std::max(begin, 0); s < e; ++s) sum += p[s];
      }
    }
  }
  return sum / (static_cast<double>(m.n_layers) * m.n_heads);
}

absl::StatusOr<RevisitStepTrace> RunRevisitStepReplay(Runtime* rt, const std::vector<int32_t>& prompt,
                                                      const std::vector<int32_t>& trace,
                                                      std::span<const PolicySpec> specs,
                                                      const std::vector<double>& thresholds, int32_t prefill_chunk) {
  const ModelConfig& cfg = rt->config();
  const PolicyModelInfo info = PolicyInfoFor(cfg);
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  const int32_t n_trace = static_cast<int32_t>(trace.size());
  if (n_trace < 2) return absl::InvalidArgumentError("trace: needs >= 2 tokens");
  if (thresholds.empty()) return absl::InvalidArgumentError("thresholds: none given");
  for (double x : thresholds) {
    if (!(x > 0.0 && x <= 1.0)) return absl::InvalidArgumentError(absl::StrCat("threshold: ", x, " is not in (0, 1]"));
  }
  // The trace forced into every entry (one token to spare: none finishes
  // within the steps measured).
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made = ReplayBatch::Create(rt, prompt, trace, n_trace + 1, specs);
  if (!made.ok()) return made.status();
  ReplayBatch& batch = **made;
  if (absl::Status s = batch.Prefill(prefill_chunk); !s.ok()) return s;

  RevisitStepTrace out;
  out.prompt_tokens = n_prompt;
  out.trace_tokens = n_trace;
  out.stats.resize(specs.size());
  for (RevisitStepStats& st : out.stats) {
    st.kl.resize(thresholds.size());
    st.top1.resize(thresholds.size());
    st.recall.resize(thresholds.size());
  }
  out.reference_mismatches += ArgMax(batch.logits(0)) != trace[0];
  std::set<int32_t> budgets;
  for (const PolicySpec& s : specs) budgets.insert(s.options.budget);
  const int32_t interval = specs.empty() ? 0 : specs.front().options.interval;
  SoftmaxRef ref;
  std::vector<std::vector<int32_t>> scratch(rt->pool()->n_threads());
  std::vector<double> mass(specs.size());
  for (int32_t t = 0; t + 1 < n_trace; ++t) {
    const int32_t pos = n_prompt + t;  // trace[t]'s; the step's logits predict trace[t + 1]
    auto measure = [&] {
      const std::span<const float> p_logits = batch.logits(0);
      ref.Set(p_logits);
      const int32_t ref_top = ArgMax(p_logits);
      out.reference_mismatches += ref_top != trace[t + 1];
      // Old generated tokens: [prompt, pos - B - interval), one mass per budget.
      for (size_t i = 0; i < specs.size(); ++i) {
        const int32_t end = pos - specs[i].options.budget - interval;
        mass[i] = end > n_prompt ? ReferenceMass(batch.recorder(), info, n_prompt, end) : -1.0;
      }
      rt->pool()->ParallelFor(static_cast<int64_t>(specs.size()), 1, [&](int64_t begin, int64_t end, int thread) {
        for (int64_t i = begin; i < end; ++i) {
          if (batch.compressor(i).evictions() == 0) continue;
          RevisitStepStats& st = out.stats[i];
          const std::span<const float> q_logits = batch.logits(i + 1);
          const double kl = ref.KlTo(q_logits);
          const double top1 = ArgMax(q_logits) == ref_top ? 1.0 : 0.0;
          const double recall = AttentionRecall(batch.recorder(), batch.kv(i), info, &scratch[thread]);
          st.kl_post.Add(kl);
          st.top1_post.Add(top1);
          st.recall_post.Add(recall);
          if (mass[i] >= 0.0) st.old_mass.Add(mass[i]);
          for (size_t k = 0; k < thresholds.size(); ++k) {
            if (mass[i] < thresholds[k]) continue;
            st.kl[k].Add(kl);
            st.top1[k].Add(top1);
            st.recall[k].Add(recall);
          }
        }
      });
    };
    if (absl::Status s = batch.Step(measure); !s.ok()) return s;  // then each entry evicts as it is due
  }
  return out;
}

absl::Status RunRevisitSteps(Runtime* rt, const RevisitStepsOptions& o, std::FILE* log) {
  if (o.thresholds.empty()) return absl::InvalidArgumentError("thresholds: none given");
  for (double x : o.thresholds) {
    if (!(x > 0.0 && x <= 1.0)) return absl::InvalidArgumentError(absl::StrCat("threshold: ", x, " is not in (0, 1]"));
  }
  const std::filesystem::path dir = std::filesystem::path(o.from) / "prompts";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("from: ", dir.string(), " is not a directory of checkpoints"));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat("from: no checkpoint in ", dir.string()));
  std::vector<nlohmann::json> kept;
  std::vector<std::string> dropped;
  int32_t interval = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("key") || !j.contains("summary")) {
      return absl::InvalidArgumentError(absl::StrCat("from: ", f.string(), " is not a beacon-eval model checkpoint"));
    }
    const int32_t iv = j["key"].value("interval", 0);
    if (iv < 1 || (interval != 0 && iv != interval)) {
      return absl::InvalidArgumentError(absl::StrCat("from: ", f.string(), ": interval ", iv, " is not one shared"));
    }
    interval = iv;
    const std::string id = j["summary"].value("id", f.stem().string());
    if (j["summary"].value("distinct_4grams", 0.0) < o.min_distinct) {
      dropped.push_back(id);
    } else {
      kept.push_back(std::move(j));
    }
  }
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid(o.policies, o.budgets, interval);
  if (!grid.ok()) return grid.status();
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", o.out_dir, ": ", ec.message()));
  std::vector<RevisitStepTrace> traces;
  for (const nlohmann::json& j : kept) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<std::vector<int32_t>> prompt =
        rt->EncodePrompt(j["key"].value("prompt", ""), /*chat=*/true, j["key"].value("system", ""));
    if (!prompt.ok()) return prompt.status();
    const std::vector<int32_t> trace =
        rt->tokenizer()->Encode(j["summary"].value("text", ""), /*parse_special=*/false, /*add_bos=*/false);
    absl::StatusOr<RevisitStepTrace> r = RunRevisitStepReplay(rt, *prompt, trace, *grid, o.thresholds, 512);
    if (!r.ok()) return r.status();
    r->id = j["summary"].value("id", "");
    r->distinct_4grams = j["summary"].value("distinct_4grams", 0.0);
    r->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(log, "[revisit-steps] %s: %d tokens, %d reference mismatches, %.0fs\n", r->id.c_str(), r->trace_tokens,
                 r->reference_mismatches, r->seconds);
    std::fflush(log);
    traces.push_back(*std::move(r));
    if (absl::Status s = WriteSummary(o, *grid, traces, dropped, interval, false); !s.ok()) return s;
  }
  return WriteSummary(o, *grid, traces, dropped, interval, true);
}

}  // namespace beacon::eval
