#include "eval/revisit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/generation.h"
#include "eval/metrics.h"
#include "eval/needle_cases.h"
#include "eval/policy_grid.h"
#include "eval/replay_batch.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon::eval {
namespace {

using Clock = std::chrono::steady_clock;

// One case's tokens. Indices into `gen` are generated-token indices; the
// token gen[g] sits at position prompt.size() + g.
struct Stream {
  struct Ask {
    int32_t fact = -1;
    int32_t begin = 0, end = 0;  // the answer's tokens: gen[begin, end)
  };
  std::vector<int32_t> prompt, gen;
  int32_t statements_end = 0;                         // gen index after the last value's statement
  int32_t first_cue = 0;                              // gen index where the questions begin
  std::vector<std::vector<int32_t>> value_positions;  // per fact: its value's digit tokens, absolute positions
  std::vector<Ask> asks;
};

bool HasDigit(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// Encodes segment by segment, so that every segment's tokens (the value's
// above all) are known exactly; the model reads the same text either way,
// only the split at segment boundaries may differ from encoding it whole.
absl::StatusOr<Stream> EncodeCase(Runtime* rt, const RevisitCase& c) {
  Stream s;
  absl::StatusOr<std::vector<int32_t>> prompt = rt->EncodePrompt(c.prompt, /*chat=*/true, "");
  if (!prompt.ok()) return prompt.status();
  s.prompt = *std::move(prompt);
  const int32_t n_prompt = static_cast<int32_t>(s.prompt.size());
  const Tokenizer* tok = rt->tokenizer();
  s.value_positions.resize(c.facts.size());
  bool cued = false;
  for (const RevisitSegment& seg : c.segments) {
    const std::vector<int32_t> ids = tok->Encode(seg.text, /*parse_special=*/false, /*add_bos=*/false);
    const int32_t at = static_cast<int32_t>(s.gen.size());
    if (seg.role == RevisitRole::kCue && !cued) {
      s.first_cue = at;
      cued = true;
    }
    if (seg.role == RevisitRole::kValue) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (HasDigit(tok->Decode({ids[i]})))
          s.value_positions[seg.fact].push_back(n_prompt + at + static_cast<int32_t>(i));
      }
      if (s.value_positions[seg.fact].empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("revisit case ", c.id, ": value '", seg.text, "' encodes to no token with a digit"));
      }
      s.statements_end = at + static_cast<int32_t>(ids.size());
    }
    s.gen.insert(s.gen.end(), ids.begin(), ids.end());
    if (seg.role == RevisitRole::kAnswer) s.asks.push_back({seg.fact, at, static_cast<int32_t>(s.gen.size())});
  }
  if (!cued || s.asks.empty() || s.asks.front().begin < 1) {
    return absl::FailedPreconditionError(absl::StrCat("revisit case ", c.id, ": no cue before an answer"));
  }
  if (n_prompt + static_cast<int64_t>(s.gen.size()) > rt->config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat("revisit case ", c.id, ": ", n_prompt + s.gen.size(),
                                                   " tokens, past the model's context ", rt->config().context_length));
  }
  return s;
}

// How much of `positions` the slots of `kv` hold, over its (layer, KV head)
// pairs: the share of pairs holding every one (all) and the mean share of
// the positions a pair holds (digits).
struct Holding {
  double all = 0, digits = 0;
};
Holding Held(const SequenceKv& kv, const PolicyModelInfo& m, const std::vector<int32_t>& positions,
             std::vector<uint8_t>* present) {
  Holding out;
  for (int l = 0; l < m.n_layers; ++l) {
    const KeysView keys(kv.cache(), &kv, l);
    for (int h = 0; h < m.n_kv_heads; ++h) {
      int32_t max_pos = 0;
      for (int32_t s = 0; s < keys.n_slots(); ++s) max_pos = std::max(max_pos, keys.position(h, s));
      present->assign(static_cast<size_t>(max_pos) + 1, 0);
      for (int32_t s = 0; s < keys.n_slots(); ++s) (*present)[keys.position(h, s)] = 1;
      const auto n = std::count_if(positions.begin(), positions.end(),
                                   [&](int32_t p) { return p <= max_pos && (*present)[p] != 0; });
      out.all += n == static_cast<std::ptrdiff_t>(positions.size()) ? 1.0 : 0.0;
      out.digits += static_cast<double>(n) / static_cast<double>(positions.size());
    }
  }
  const double pairs = static_cast<double>(m.n_layers) * m.n_kv_heads;
  out.all /= pairs;
  out.digits /= pairs;
  return out;
}

double LogSoftmaxAt(std::span<const float> logits, int32_t token) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return static_cast<double>(logits[token]) - mx - std::log(sum);
}

// One configuration's answers, built up over the question tokens.
struct Config {
  std::vector<int32_t> argmax;  // per asked fact, built up
  std::vector<bool> all_match;
  RevisitRow row;
};

// Runs one case over every configuration; fills result->rows. Entry 0 of
// the ReplayBatch is the full cache, entry i + 1 grid[i]; every generated
// token is teacher-forced to s.gen, one decode step per token as in serving.
absl::Status RunCase(Runtime* rt, const RevisitOptions& o, const std::vector<PolicySpec>& grid, const RevisitCase& c,
                     const Stream& s, RevisitCaseResult* result) {
  const PolicyModelInfo info = PolicyInfoFor(rt->config());
  const int32_t n_gen = static_cast<int32_t>(s.gen.size());
  // One token past the case: the step that feeds its last token (whose
  // logits end the last answer) generates one more, drawn.
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made =
      ReplayBatch::Create(rt, s.prompt, s.gen, n_gen + 1, grid, /*record=*/false);
  if (!made.ok()) return made.status();
  ReplayBatch& batch = **made;
  auto kv_of = [&](size_t i) -> const SequenceKv& { return i == 0 ? batch.reference_kv() : batch.kv(i - 1); };

  std::vector<Config> cfgs(grid.size() + 1);
  for (size_t i = 0; i < cfgs.size(); ++i) {
    Config& cf = cfgs[i];
    cf.row.policy = i == 0 ? "full" : grid[i - 1].policy;
    cf.row.budget = i == 0 ? 0 : grid[i - 1].budget;
    cf.row.answers.resize(s.asks.size());
    cf.all_match.assign(s.asks.size(), true);
  }
  if (absl::Status st = batch.Prefill(o.prefill_chunk); !st.ok()) return st;

  // The stretch, then the questions: step g feeds gen[g] (the prefill made
  // gen[0]), and its logits (row i: configuration i's) predict gen[g + 1].
  std::vector<uint8_t> present;
  std::vector<std::vector<int32_t>> greedy(cfgs.size() * s.asks.size());
  for (int32_t g = 0; g < n_gen; ++g) {
    auto measure = [&] {
      if (g + 1 == n_gen) {
        // The eviction after the case's last token belongs to no measured token.
        for (size_t i = 1; i < cfgs.size(); ++i) cfgs[i].row.evictions = batch.compressor(i - 1).evictions();
      }
      for (size_t a = 0; a < s.asks.size(); ++a) {
        const Stream::Ask& ask = s.asks[a];
        if (g + 1 < ask.begin || g + 1 > ask.end) continue;
        for (size_t i = 0; i < cfgs.size(); ++i) {
          Config& cf = cfgs[i];
          RevisitAnswer& ans = cf.row.answers[a];
          const std::span<const float> row = batch.logits(i);
          const int32_t top = ArgMax(row);
          greedy[i * s.asks.size() + a].push_back(top);
          if (g + 1 == ask.begin) {
            // The cache that computes the first answer token, before this
            // step's eviction.
            ans.fact = ask.fact;
            ans.revisited = c.facts[ask.fact].revisited;
            const Holding held = Held(kv_of(i), info, s.value_positions[ask.fact], &present);
            ans.pairs_held = held.all;
            ans.digits_held = held.digits;
            if (a == 0) {
              Mean rev, plain, rev_digits, plain_digits;
              for (size_t f = 0; f < c.facts.size(); ++f) {
                const Holding hf = Held(kv_of(i), info, s.value_positions[f], &present);
                (c.facts[f].revisited ? rev : plain).Add(hf.all);
                (c.facts[f].revisited ? rev_digits : plain_digits).Add(hf.digits);
              }
              cf.row.held_revisited = rev.value();
              cf.row.held_plain = plain.value();
              cf.row.digits_revisited = rev_digits.value();
              cf.row.digits_plain = plain_digits.value();
            }
          }
          if (g + 1 < ask.end) {
            ans.logprob += LogSoftmaxAt(row, s.gen[g + 1]);
            if (top != s.gen[g + 1]) cf.all_match[a] = false;
          } else {  // the token after the answer: the boundary
            ans.greedy = rt->tokenizer()->Decode(greedy[i * s.asks.size() + a]);
            ans.exact = cf.all_match[a] && AnswerMatches(ans.greedy, c.facts[ask.fact].value);
          }
        }
      }
    };
    if (absl::Status st = batch.Step(measure); !st.ok()) return st;
  }
  for (size_t i = 0; i < cfgs.size(); ++i) {
    cfgs[i].row.peak_slots = kv_of(i).peak_slots();
    result->rows.push_back(std::move(cfgs[i].row));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRevisitOptions(const RevisitOptions& o) {
  if (absl::StatusOr<std::vector<PolicySpec>> g = MakePolicyGrid(o.policies, o.budgets, o.interval); !g.ok()) {
    return g.status();
  }
  if (o.cases < 1) return absl::InvalidArgumentError(absl::StrCat("cases: ", o.cases, " is not >= 1"));
  if (o.prefill_chunk < 1) return absl::InvalidArgumentError("prefill_chunk: must be >= 1");
  return ValidateRevisitShape(o.shape);
}

absl::Status RunRevisitEval(Runtime* rt, const RevisitOptions& o, std::FILE* log,
                            const std::function<void(const RevisitCaseResult&)>& on_case) {
  if (absl::Status st = ValidateRevisitOptions(o); !st.ok()) return st;
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid(o.policies, o.budgets, o.interval);
  if (!grid.ok()) return grid.status();
  if (rt->tokenizer() == nullptr) return absl::FailedPreconditionError("the model has no tokenizer");
  const Clock::time_point t0 = Clock::now();
  for (int32_t id = 0; id < o.cases; ++id) {
    const Clock::time_point tc = Clock::now();
    const RevisitCase c = MakeRevisitCase(o.seed, id, o.shape);
    absl::StatusOr<Stream> s = EncodeCase(rt, c);
    if (!s.ok()) return s.status();
    RevisitCaseResult r;
    r.id = id;
    r.prompt_tokens = static_cast<int32_t>(s->prompt.size());
    r.generated_tokens = static_cast<int32_t>(s->gen.size());
    r.stretch_tokens = s->first_cue - s->statements_end;
    for (const RevisitFact& f : c.facts) {
      r.values.push_back(f.value);
      r.revisited.push_back(f.revisited);
    }
    if (absl::Status st = RunCase(rt, o, *grid, c, *s, &r); !st.ok()) return st;
    r.seconds = std::chrono::duration<double>(Clock::now() - tc).count();
    const RevisitRow& full = r.rows.front();
    std::fprintf(log, "[revisit] case %d/%d: %d prompt + %d generated tokens; full: %s / %s; %.0fs, elapsed %.0fs\n",
                 id + 1, o.cases, r.prompt_tokens, r.generated_tokens, full.answers[0].exact ? "right" : "wrong",
                 full.answers[1].exact ? "right" : "wrong", r.seconds,
                 std::chrono::duration<double>(Clock::now() - t0).count());
    std::fflush(log);
    on_case(r);
  }
  return absl::OkStatus();
}

}  // namespace beacon::eval
