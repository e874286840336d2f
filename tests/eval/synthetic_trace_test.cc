// The synthetic revisiting traces have the structure the benchmark relies
// on: revisit queries put most of their true attention on the plan span
// (and on their own topic's part of it), working queries attend locally,
// and revisit queries resemble the plan-time queries of their topic.
#include "eval/synthetic_trace.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"

namespace beacon::eval {
namespace {

// True attention of query head `qh` at `pos` over positions [0, pos], with
// RoPE applied as the engine does.
std::vector<float> TrueAttention(const SyntheticTrace& t, int pos, int qh) {
  const SyntheticTraceOptions& o = t.options;
  const TraceRope rope(o);
  const int d = o.head_dim, kvh = qh / (o.n_heads / o.n_kv_heads);
  std::vector<float> keys(static_cast<size_t>(pos + 1) * d), q(d), probs(pos + 1);
  for (int p = 0; p <= pos; ++p) rope.Apply(t.key(p, kvh), p, &keys[static_cast<size_t>(p) * d]);
  rope.Apply(t.query(pos, qh), pos, q.data());
  AttentionProbs(q.data(), keys.data(), d, pos + 1, d, probs.data());
  return probs;
}

double Cosine(const float* a, const float* b, int d) {
  return Dot(a, b, d) / std::sqrt(static_cast<double>(Dot(a, a, d)) * Dot(b, b, d));
}

class SyntheticTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticTraceOptions o;
    o.middle_len = 1200;  // shorter than the tool's default, same structure
    o.seed = 3;
    ASSERT_TRUE(o.Validate().ok());
    trace_ = GenerateSyntheticTrace(o);
  }
  SyntheticTrace trace_;
};

TEST_F(SyntheticTraceTest, LayoutAndRevisitCount) {
  const SyntheticTraceOptions& o = trace_.options;
  ASSERT_EQ(trace_.n_tokens(), o.prompt_len + o.plan_len + o.middle_len);
  int revisits = 0;
  for (int p = 0; p < trace_.n_tokens(); ++p) {
    if (p < trace_.plan_begin()) {
      EXPECT_EQ(trace_.kind[p], TokenKind::kPrompt);
    }
    if (p >= trace_.plan_begin() && p < trace_.plan_end()) {
      EXPECT_EQ(trace_.kind[p], TokenKind::kPlan);
    }
    if (trace_.kind[p] == TokenKind::kRevisit) {
      ++revisits;
      EXPECT_GE(p, trace_.plan_end());
      EXPECT_GE(trace_.topic[p], 0);
      EXPECT_LT(trace_.topic[p], o.plan_steps);
    }
  }
  // Gaps are uniform in [50, 150]: 1200 / 100 = 12 on average.
  EXPECT_GE(revisits, 8);
  EXPECT_LE(revisits, 24);
}

TEST_F(SyntheticTraceTest, RevisitQueriesAttendToThePlanSpan) {
  int revisits = 0;
  double plan_mass = 0.0, topic_mass = 0.0;
  for (int p = 0; p < trace_.n_tokens(); ++p) {
    if (trace_.kind[p] != TokenKind::kRevisit) continue;
    for (int qh = 0; qh < trace_.options.n_heads; ++qh) {
      const std::vector<float> probs = TrueAttention(trace_, p, qh);
      double on_plan = 0.0, on_topic = 0.0;
      for (int s = trace_.plan_begin(); s < trace_.plan_end(); ++s) {
        on_plan += probs[s];
        if (trace_.topic[s] == trace_.topic[p]) on_topic += probs[s];
      }
      EXPECT_GT(on_plan, 0.5) << "revisit at " << p << ", head " << qh;
      plan_mass += on_plan;
      topic_mass += on_topic;
      ++revisits;
    }
  }
  ASSERT_GT(revisits, 0);
  EXPECT_GT(plan_mass / revisits, 0.8);
  EXPECT_GT(topic_mass / revisits, 0.75);  // the revisited step, not the plan as a whole
}

TEST_F(SyntheticTraceTest, WorkingQueriesAttendLocally) {
  const int seg = trace_.options.segment_len;
  double local = 0.0, plan = 0.0;
  int n = 0;
  for (int p = trace_.plan_end() + seg; p < trace_.n_tokens(); p += 37) {
    if (trace_.kind[p] != TokenKind::kWork) continue;
    const std::vector<float> probs = TrueAttention(trace_, p, 0);
    for (int s = std::max(0, p - seg); s <= p; ++s) local += probs[s];
    for (int s = trace_.plan_begin(); s < trace_.plan_end(); ++s) plan += probs[s];
    ++n;
  }
  ASSERT_GT(n, 10);
  EXPECT_GT(local / n, 0.5);
  EXPECT_LT(plan / n, 0.05);  // only revisits read the plan
}

TEST_F(SyntheticTraceTest, RevisitQueriesResemblePlanTimeQueriesOfTheirTopic) {
  const int d = trace_.options.head_dim;
  double same = 0.0, work = 0.0;
  int n_same = 0, n_work = 0;
  for (int p = 0; p < trace_.n_tokens(); ++p) {
    if (trace_.kind[p] != TokenKind::kRevisit) continue;
    for (int s = trace_.plan_begin(); s < trace_.plan_end(); ++s) {
      if (trace_.topic[s] != trace_.topic[p]) continue;
      same += Cosine(trace_.query(p, 0), trace_.query(s, 0), d);
      ++n_same;
    }
    work += Cosine(trace_.query(p, 0), trace_.query(p - 1, 0), d);  // the working query before it
    ++n_work;
  }
  ASSERT_GT(n_same, 0);
  EXPECT_GT(same / n_same, 0.7);
  EXPECT_LT(std::abs(work / n_work), 0.2);
}

TEST(SyntheticTraceOptionsTest, DeterministicInTheSeedAndValidated) {
  SyntheticTraceOptions o;
  o.middle_len = 300;
  const SyntheticTrace a = GenerateSyntheticTrace(o), b = GenerateSyntheticTrace(o);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.k, b.k);
  o.seed = 2;
  EXPECT_NE(GenerateSyntheticTrace(o).q, a.q);
  o.n_heads = 3;  // not a multiple of 2 KV heads
  EXPECT_FALSE(o.Validate().ok());
  o.n_heads = 4;
  o.plan_len = 30;  // not a multiple of 4 plan steps
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace beacon::eval
