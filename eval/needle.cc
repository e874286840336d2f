#include "eval/needle.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "eval/model_eval.h"
#include "eval/needle_passes.h"
#include "eval/policy_grid.h"

namespace beacon::eval {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

absl::StatusOr<NeedleStream> EncodeCase(Runtime* rt, const NeedleCase& c, int32_t answer_slack) {
  NeedleStream s;
  absl::StatusOr<std::vector<int32_t>> prompt = rt->EncodePrompt(c.prompt, /*chat=*/true, "");
  if (!prompt.ok()) return prompt.status();
  s.prompt = *std::move(prompt);
  const Tokenizer* tok = rt->tokenizer();
  s.fact = tok->Encode(c.fact, /*parse_special=*/false, /*add_bos=*/false);
  s.cue = tok->Encode(c.cue, /*parse_special=*/false, /*add_bos=*/false);
  s.answer_tokens =
      static_cast<int32_t>(tok->Encode(" " + c.answer, /*parse_special=*/false, /*add_bos=*/false).size()) +
      answer_slack;
  // A name's first word, with and without a leading space: the story would
  // otherwise often make the named person a character. Numbers and codes
  // split into short tokens a story needs, so they are left to the
  // "filler restates the answer" check alone.
  if (c.kind == FactKind::kName) {
    const std::string first = c.answer.substr(0, c.answer.find(' '));
    for (const std::string& w : {" " + first, first}) {
      s.filler_banned.push_back(tok->Encode(w, /*parse_special=*/false, /*add_bos=*/false).front());
    }
  }
  return s;
}

}  // namespace

absl::Status ValidateNeedleOptions(const NeedleOptions& o) {
  if (absl::StatusOr<std::vector<PolicySpec>> g = MakePolicyGrid(o.policies, o.budgets, o.interval); !g.ok()) {
    return g.status();
  }
  if (o.distances.empty()) return absl::InvalidArgumentError("distances: none given");
  for (int32_t d : o.distances) {
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat("distances: ", d, " is not >= 1"));
  }
  if (o.cases < 1) return absl::InvalidArgumentError("cases: must be >= 1");
  if (o.answer_slack < 1) return absl::InvalidArgumentError("answer_slack: must be >= 1 (the boundary check)");
  SamplingParams sp;
  sp.temperature = o.filler_temperature;
  sp.top_p = o.filler_top_p;
  sp.frequency_penalty = o.filler_frequency_penalty;
  if (absl::Status s = sp.Validate(); !s.ok()) return absl::InvalidArgumentError(absl::StrCat("filler: ", s.message()));
  return absl::OkStatus();
}

absl::Status RunNeedleEval(Runtime* rt, const NeedleOptions& o, std::FILE* log,
                           const std::function<void(const NeedleCaseResult&)>& on_case) {
  if (absl::Status s = ValidateNeedleOptions(o); !s.ok()) return s;
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid(o.policies, o.budgets, o.interval);
  if (!grid.ok()) return grid.status();
  const Tokenizer* tok = rt->tokenizer();
  if (tok == nullptr) return absl::FailedPreconditionError("the model has no tokenizer");

  const Clock::time_point t0 = Clock::now();
  for (int32_t id = 0; id < o.cases; ++id) {
    const NeedleCase c = MakeNeedleCase(o.seed, id);
    absl::StatusOr<NeedleStream> stream = EncodeCase(rt, c, o.answer_slack);
    if (!stream.ok()) return stream.status();
    SamplingParams sp;
    sp.temperature = o.filler_temperature;
    sp.top_p = o.filler_top_p;
    sp.frequency_penalty = o.filler_frequency_penalty;
    sp.seed = c.filler_seed;
    for (int32_t distance : o.distances) {
      NeedleCaseResult r;
      r.id = id;
      r.distance = distance;
      r.kind = c.kind;
      r.answer = c.answer;
      r.prompt_tokens = static_cast<int32_t>(stream->prompt.size());
      r.total_tokens = stream->TotalTokens(distance);

      Clock::time_point tp = Clock::now();
      absl::StatusOr<FullCacheRun> full = RunFullCache(rt, *stream, distance, sp, o.prefill_chunk);
      if (!full.ok()) return full.status();
      r.full_seconds = Since(tp);
      r.full_text = tok->Decode(full->answer);
      r.filler_text = tok->Decode(full->filler);
      r.filler_distinct_4grams = DistinctNgramRatio(full->filler, 4);
      if (!AnswerMatches(r.full_text, c.answer)) {
        r.status = "full cache wrong";
      } else if (r.filler_text.find(c.answer) != std::string::npos) {
        r.status = "filler restates the answer";
      } else {
        r.status = "kept";
        r.kept = true;
      }

      if (r.kept) {
        // Only the configurations that can evict on this case run.
        const int32_t feeds = stream->Feeds(distance);
        std::vector<PolicySpec> evicting;
        for (const PolicySpec& s : *grid) {
          if (EvictsBeforeLastStep(s.options, r.prompt_tokens, feeds)) evicting.push_back(s);
        }
        tp = Clock::now();
        absl::StatusOr<std::vector<ConfigAnswer>> answers =
            RunCompressed(rt, *stream, full->filler, evicting, o.prefill_chunk);
        if (!answers.ok()) return answers.status();
        r.batch_seconds = Since(tp);
        r.full_consistent = (*answers)[0].answer == full->answer;
        auto row_of = [&](const std::string& policy, int32_t budget, const ConfigAnswer& a, bool ran) {
          NeedleRow row{policy, budget, false, tok->Decode(a.answer), ran ? a.evictions : 0, a.peak_slots, ran};
          row.success = AnswerMatches(row.generated, c.answer);
          return row;
        };
        r.rows.push_back(row_of("full", 0, (*answers)[0], true));
        size_t next = 0;
        for (const PolicySpec& s : *grid) {
          const bool ran =
              next < evicting.size() && evicting[next].policy == s.policy && evicting[next].budget == s.budget;
          r.rows.push_back(row_of(s.policy, s.budget, ran ? (*answers)[1 + next] : (*answers)[0], ran));
          if (ran) ++next;
        }
      }
      std::fprintf(log,
                   "[needle] case %d/%d D=%d %s '%s': %s (full said '%s'), %d tokens, full %.0fs, batch %.0fs, "
                   "elapsed %.0fs\n",
                   id + 1, o.cases, distance, std::string(FactKindName(c.kind)).c_str(), c.answer.c_str(),
                   r.status.c_str(), r.full_text.c_str(), r.total_tokens, r.full_seconds, r.batch_seconds, Since(t0));
      if (r.kept && !r.full_consistent) {
        std::fprintf(log, "[needle] note: case %d D=%d: the batch's full cache answered '%s', pass 1 '%s'\n", id,
                     distance, r.rows[0].generated.c_str(), r.full_text.c_str());
      }
      std::fflush(log);
      on_case(r);
    }
  }
  return absl::OkStatus();
}

}  // namespace beacon::eval
