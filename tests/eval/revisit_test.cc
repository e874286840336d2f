// beacon-eval revisit: the case generator places facts, revisits and
// questions as specified; bad options name the field; and a small run on the
// default model holds what must hold whatever the model: the full cache keeps
// every fact's positions in every (layer, KV head) pair, streaming at a
// budget that forces eviction keeps none of them, and feeding the stretch
// in chunks evicts exactly when one token per forward does.
#include "eval/revisit.h"

#include <filesystem>
#include <set>

#include "engine/runtime.h"
#include "eval/policy_grid.h"
#include "eval/revisit_cases.h"
#include "eval/revisit_report.h"
#include "gtest/gtest.h"
#include "kv/policy/eviction_schedule.h"
#include "tests/engine/default_model.h"

namespace beacon::eval {
namespace {

TEST(RevisitCaseTest, DeterministicUnderASeed) {
  const RevisitShape shape;
  for (int32_t id = 0; id < 10; ++id) {
    EXPECT_EQ(RevisitText(MakeRevisitCase(3, id, shape)), RevisitText(MakeRevisitCase(3, id, shape)));
  }
  int same = 0;
  for (int32_t id = 0; id < 10; ++id) {
    same += RevisitText(MakeRevisitCase(3, id, shape)) == RevisitText(MakeRevisitCase(4, id, shape));
  }
  EXPECT_EQ(same, 0);
}

TEST(RevisitCaseTest, RevisitsArePlacedAsSpecified) {
  RevisitShape shape;
  shape.facts = 5;
  shape.revisited = 2;
  shape.revisits_per_fact = 4;
  shape.steps = 11;
  for (int32_t id = 0; id < 40; ++id) {
    const RevisitCase c = MakeRevisitCase(1, id, shape);
    SCOPED_TRACE(RevisitText(c));
    ASSERT_EQ(c.facts.size(), 5u);
    int revisited = 0;
    std::set<std::string> values;
    for (const RevisitFact& f : c.facts) {
      revisited += f.revisited;
      ASSERT_EQ(f.value.size(), 4u);
      EXPECT_NE(f.value[0], '0');
      values.insert(f.value);
      EXPECT_EQ(c.prompt.find(f.value), std::string::npos);  // the prompt is protected: no fact there
    }
    EXPECT_EQ(revisited, 2);
    EXPECT_EQ(values.size(), 5u);
    // One revisited and one plain fact asked, revisited first on even ids.
    ASSERT_EQ(c.asked.size(), 2u);
    EXPECT_EQ(c.facts[c.asked[0]].revisited, id % 2 == 0);
    EXPECT_EQ(c.facts[c.asked[1]].revisited, id % 2 != 0);

    std::vector<int> mentions(c.facts.size(), 0), statements(c.facts.size(), 0);
    size_t last_value = 0, first_revisit = c.segments.size(), last_revisit = 0, first_cue = c.segments.size();
    int steps_seen = 0, steps_before_first_revisit = 0;
    for (size_t i = 0; i < c.segments.size(); ++i) {
      const RevisitSegment& s = c.segments[i];
      if (s.text.rfind("Step ", 0) == 0) ++steps_seen;
      switch (s.role) {
        case RevisitRole::kValue:
          ++statements[s.fact];
          last_value = i;
          EXPECT_EQ(s.text, " " + c.facts[s.fact].value);
          break;
        case RevisitRole::kRevisit:
          ++mentions[s.fact];
          if (first_revisit == c.segments.size()) steps_before_first_revisit = steps_seen;
          first_revisit = std::min(first_revisit, i);
          last_revisit = i;
          EXPECT_NE(s.text.find(c.facts[s.fact].subject), std::string::npos);
          break;
        case RevisitRole::kCue: first_cue = std::min(first_cue, i); break;
        case RevisitRole::kAnswer: EXPECT_EQ(s.text, " " + c.facts[s.fact].value); break;
        case RevisitRole::kText: break;
      }
      // No value anywhere but its statement and its answer: a revisit never
      // restates one, nor does a counting step by chance.
      if (s.role != RevisitRole::kValue && s.role != RevisitRole::kAnswer) {
        for (const RevisitFact& f : c.facts) EXPECT_EQ(s.text.find(f.value), std::string::npos) << s.text;
      }
    }
    EXPECT_EQ(steps_seen, 11);
    EXPECT_GE(steps_before_first_revisit, 1);
    for (size_t f = 0; f < c.facts.size(); ++f) {
      EXPECT_EQ(statements[f], 1);
      EXPECT_EQ(mentions[f], c.facts[f].revisited ? 4 : 0);
    }
    EXPECT_LT(last_value, first_revisit);
    EXPECT_LT(last_revisit, first_cue);
  }
  // Mentions spread over the stretch: 8 mentions over 11 steps.
  std::vector<int32_t> after;
  for (int32_t k = 0; k < 8; ++k) after.push_back(AfterStep(k, 8, 11));
  EXPECT_EQ(after, (std::vector<int32_t>{1, 2, 3, 4, 6, 7, 8, 9}));
}

TEST(RevisitOptionsTest, BadOptionsNameTheField) {
  RevisitOptions good;
  good.policies = {"streaming"};
  EXPECT_TRUE(ValidateRevisitOptions(good).ok());
  auto message = [&](auto mutate) {
    RevisitOptions o = good;
    mutate(o);
    const absl::Status s = ValidateRevisitOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_NE(message([](RevisitOptions& o) { o.cases = 0; }).find("cases"), std::string::npos);
  EXPECT_NE(message([](RevisitOptions& o) { o.shape.facts = 11; }).find("facts"), std::string::npos);
  EXPECT_NE(message([](RevisitOptions& o) { o.shape.revisited = 6; }).find("revisited"), std::string::npos);
  EXPECT_NE(message([](RevisitOptions& o) { o.shape.steps = 0; }).find("steps"), std::string::npos);
  EXPECT_NE(message([](RevisitOptions& o) { o.policies = {"lru"}; }).find("lru"), std::string::npos);
  EXPECT_NE(message([](RevisitOptions& o) { o.policies = {"full"}; }).find("full"), std::string::npos);
}

std::vector<RevisitCaseResult> RunSmall(Runtime* rt) {
  RevisitOptions o;
  o.policies = {"streaming", "beacon", "h2o"};
  o.budgets = {32};
  o.interval = 8;
  o.cases = 1;
  o.shape.facts = 4;
  o.shape.revisited = 2;
  o.shape.revisits_per_fact = 2;
  o.shape.steps = 5;
  std::vector<RevisitCaseResult> out;
  const absl::Status s = RunRevisitEval(rt, o, stderr, [&](const RevisitCaseResult& r) { out.push_back(r); });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(RevisitModelTest, FullHoldsEveryFactStreamingNoneAndEvictionsFollowTheSchedule) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  const std::vector<RevisitCaseResult> runs = RunSmall(rt);
  ASSERT_EQ(runs.size(), 1u);
  const RevisitCaseResult& r = runs[0];
  // The stretch alone is far past budget + interval (40 generated slots).
  EXPECT_GT(r.stretch_tokens, 3 * 40);
  ASSERT_EQ(r.rows.size(), 4u);
  const RevisitRow& full = r.rows[0];
  EXPECT_EQ(full.policy, "full");
  EXPECT_EQ(full.evictions, 0);
  EXPECT_EQ(full.peak_slots, r.prompt_tokens + r.generated_tokens);
  EXPECT_DOUBLE_EQ(full.held_revisited, 1.0);
  EXPECT_DOUBLE_EQ(full.held_plain, 1.0);
  ASSERT_EQ(full.answers.size(), 2u);
  EXPECT_NE(full.answers[0].revisited, full.answers[1].revisited);
  EXPECT_DOUBLE_EQ(full.digits_revisited, 1.0);
  EXPECT_DOUBLE_EQ(full.digits_plain, 1.0);
  for (const RevisitAnswer& a : full.answers) {
    EXPECT_DOUBLE_EQ(a.pairs_held, 1.0);
    EXPECT_DOUBLE_EQ(a.digits_held, 1.0);
    EXPECT_LT(a.logprob, 0.0);
  }
  const RevisitRow& streaming = r.rows[1];
  EXPECT_EQ(streaming.policy, "streaming");
  EXPECT_LE(streaming.peak_slots, r.prompt_tokens + 32 + 8);
  EXPECT_DOUBLE_EQ(streaming.held_revisited, 0.0);
  EXPECT_DOUBLE_EQ(streaming.held_plain, 0.0);
  EXPECT_DOUBLE_EQ(streaming.digits_revisited, 0.0);
  EXPECT_DOUBLE_EQ(streaming.digits_plain, 0.0);
  for (const RevisitAnswer& a : streaming.answers) {
    EXPECT_DOUBLE_EQ(a.pairs_held, 0.0);
    EXPECT_DOUBLE_EQ(a.digits_held, 0.0);
  }
  // Every compressing row evicted as its schedule says over the case's
  // tokens: after the prompt and after every token but the last.
  for (size_t i = 1; i < r.rows.size(); ++i) {
    SCOPED_TRACE(r.rows[i].policy);
    absl::StatusOr<std::vector<PolicySpec>> spec = MakePolicyGrid({r.rows[i].policy}, {32}, 8);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EvictionSchedule schedule(spec->front().options, r.prompt_tokens);
    int32_t slots = r.prompt_tokens;
    int64_t evictions = 0;
    for (int32_t g = 0; g < r.generated_tokens; ++g) {  // after the prompt, then after tokens 0 .. n-2
      if (g > 0) ++slots;
      if (schedule.OnDecodeStep(slots)) {
        ++evictions;
        slots = schedule.bound();
        schedule.OnEvicted();
      }
    }
    EXPECT_GT(evictions, 2);
    EXPECT_EQ(r.rows[i].evictions, evictions);
  }
  const std::vector<RevisitCell> cells = SummarizeRevisit(runs);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_DOUBLE_EQ(cells[0].held_revisited, 1.0);
  EXPECT_NE(RevisitMarkdown(cells, runs, "# t\n").find("| streaming 32 |"), std::string::npos);
}

}  // namespace
}  // namespace beacon::eval
