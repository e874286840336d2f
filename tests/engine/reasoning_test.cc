// The reasoning/answer split (engine/reasoning.h) on the real
// DeepSeek-R1-Distill-Qwen-7B vocabulary (<think> = 151648, </think> =
// 151649, user-defined tokens), driven through Generation with chosen
// tokens (AdvanceSampled), so every split point, flush and forced close is
// exact. Weights are dummy: no forward pass runs here.
#include "engine/reasoning.h"

#include <string>
#include <vector>

#include "engine/generation.h"
#include "engine/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"
#include "tests/engine/r1_runtime.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kOpen = 151648;
constexpr int32_t kClose = 151649;

using testing::R1Runtime;
using testing::SourcePath;

class ReasoningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = R1Runtime();
    ASSERT_NE(rt_, nullptr);
    cache_ = *rt_->MakeKvCache(512);
    absl::StatusOr<ReasoningSyntax> s = ResolveReasoningParser("auto", *rt_->tokenizer());
    ASSERT_TRUE(s.ok()) << s.status();
    r1_ = *s;
  }

  std::vector<int32_t> Ids(const std::string& text) const { return rt_->tokenizer()->Encode(text, false, false); }

  struct Out {
    std::string reasoning, answer;
    std::vector<int32_t> ids;
    std::vector<TextPart> parts;  // per event
    FinishReason finish = FinishReason::kNone;
    int32_t reasoning_tokens = 0;
  };
  // Generates `tokens` (each replaced by </think> when the limit forces it).
  Out Run(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens, GenerationOptions o) {
    o.max_tokens = static_cast<int32_t>(tokens.size()) + 1;
    auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt, o);
    EXPECT_TRUE(g.ok()) << g.status();
    Out out;
    int32_t fed = static_cast<int32_t>(prompt.size());
    for (int32_t t : tokens) {
      TokenEvent ev = (*g)->AdvanceSampled(fed, t);
      fed = 1;
      out.ids.push_back(ev.id);
      out.parts.push_back(ev.part);
      (ev.part == TextPart::kReasoning ? out.reasoning : out.answer) += ev.text;
      if (ev.finish != FinishReason::kNone) break;
    }
    out.finish = (*g)->finish_reason();
    out.reasoning_tokens = (*g)->reasoning_tokens();
    return out;
  }
  GenerationOptions WithReasoning(const std::vector<int32_t>& prompt, int32_t max = 0) const {
    GenerationOptions o;
    o.reasoning = ReasoningFor(r1_, "<｜Assistant｜>", max);
    return o;
  }
  std::vector<int32_t> Cat(std::vector<int32_t> a, const std::vector<int32_t>& b) const {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<KvCache> cache_;
  ReasoningSyntax r1_;
};

TEST_F(ReasoningTest, AutoPicksDeepSeekR1ForTheR1TemplateAndNoneWithoutMarkers) {
  EXPECT_EQ(r1_.parser, ReasoningParser::kDeepSeekR1);
  EXPECT_EQ(r1_.open_id, kOpen);
  EXPECT_EQ(r1_.close_id, kClose);
  EXPECT_EQ(ResolveReasoningParser("none", *rt_->tokenizer())->parser, ReasoningParser::kNone);
  EXPECT_EQ(ResolveReasoningParser("qwen3", *rt_->tokenizer())->parser, ReasoningParser::kQwen3);
  absl::StatusOr<ReasoningSyntax> bad = ResolveReasoningParser("deepseek", *rt_->tokenizer());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'deepseek' is not one of auto, none, deepseek_r1, qwen3"));

  // Qwen3's template (enable_thinking) over the same vocabulary.
  auto qwen3 = R1Runtime(SourcePath("tests/fixtures/chat_templates/Qwen-Qwen3-0.6B.jinja"));
  ASSERT_NE(qwen3, nullptr);
  EXPECT_EQ(ResolveReasoningParser("auto", *qwen3->tokenizer())->parser, ReasoningParser::kQwen3);

  // The default model has no <think> tokens: auto is none, asking is an error.
  Runtime* def = testing::DefaultModel();
  if (def == nullptr) GTEST_SKIP() << "default model absent";
  EXPECT_EQ(ResolveReasoningParser("auto", *def->tokenizer())->parser, ReasoningParser::kNone);
  absl::StatusOr<ReasoningSyntax> none = ResolveReasoningParser("deepseek_r1", *def->tokenizer());
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("--reasoning-parser deepseek_r1"));
}

TEST_F(ReasoningTest, TheGenerationPromptsLastMarkerDecidesWhereGenerationStarts) {
  const std::string plain = "<｜Assistant｜>";
  const std::string open = plain + "<think>\n";
  const std::string closed = open + "\n</think>\n\n";
  ReasoningSyntax qwen3 = r1_;
  qwen3.parser = ReasoningParser::kQwen3;
  EXPECT_TRUE(ReasoningFor(r1_, plain, 0).starts_inside);  // R1 reasons first
  EXPECT_TRUE(ReasoningFor(r1_, open, 0).starts_inside);
  EXPECT_FALSE(ReasoningFor(r1_, closed, 0).starts_inside);
  EXPECT_TRUE(ReasoningFor(r1_, closed + "<think>", 0).starts_inside);
  EXPECT_FALSE(ReasoningFor(qwen3, plain, 0).starts_inside);  // Qwen3 only when opened
  EXPECT_TRUE(ReasoningFor(qwen3, open, 0).starts_inside);
  EXPECT_FALSE(ReasoningFor(qwen3, closed, 0).starts_inside);  // enable_thinking=false
  EXPECT_FALSE(ReasoningFor(ReasoningSyntax(), open, 0).starts_inside);
  EXPECT_EQ(ReasoningFor(r1_, plain, 7).max_reasoning_tokens, 7);
}

TEST_F(ReasoningTest, SplitsExactlyAtTheClosingMarker) {
  const std::vector<int32_t> prompt = Ids("q");
  const std::vector<int32_t> think = Ids("Let me think: 2+2 is 4.");
  const std::vector<int32_t> answer = Ids("\n\nThe answer is 4.");
  Out out = Run(prompt, Cat(Cat(think, {kClose}), answer), WithReasoning(prompt));
  EXPECT_EQ(out.reasoning, "Let me think: 2+2 is 4.");
  EXPECT_EQ(out.answer, "\n\nThe answer is 4.");
  EXPECT_EQ(out.reasoning_tokens, static_cast<int32_t>(think.size()) + 1);
  for (size_t i = 0; i < out.parts.size(); ++i) {
    EXPECT_EQ(out.parts[i], i <= think.size() ? TextPart::kReasoning : TextPart::kAnswer) << i;
  }
}

TEST_F(ReasoningTest, AGeneratedOpeningMarkerIsDroppedAndCounted) {
  const std::vector<int32_t> prompt = Ids("q");
  Out out = Run(prompt, Cat(Cat({kOpen}, Ids("hmm")), Cat({kClose}, Ids("ok"))), WithReasoning(prompt));
  EXPECT_EQ(out.reasoning, "hmm");
  EXPECT_EQ(out.answer, "ok");
  EXPECT_EQ(out.reasoning_tokens, 1 + static_cast<int32_t>(Ids("hmm").size()) + 1);
}

TEST_F(ReasoningTest, Qwen3OpensOnlyBeforeAnyAnswerAndLaterMarkersAreText) {
  const std::vector<int32_t> prompt = Ids("q");
  GenerationOptions o;
  ReasoningSyntax qwen3 = r1_;
  qwen3.parser = ReasoningParser::kQwen3;
  o.reasoning = ReasoningFor(qwen3, "<|im_start|>assistant\n", 0);
  Out opened = Run(prompt, Cat(Cat({kOpen}, Ids("r")), Cat({kClose}, Ids("a"))), o);
  EXPECT_EQ(opened.reasoning, "r");
  EXPECT_EQ(opened.answer, "a");
  Out late = Run(prompt, Cat(Ids("a"), Cat({kOpen}, Ids("b"))), o);
  EXPECT_EQ(late.reasoning, "");
  EXPECT_EQ(late.answer, "a<think>b");  // user-defined tokens render as their text
  EXPECT_EQ(late.reasoning_tokens, 0);
}

TEST_F(ReasoningTest, TheLimitForcesTheClosingMarkerOnBothSamplingPaths) {
  const std::vector<int32_t> prompt = Ids("q");
  const std::vector<int32_t> words = Ids(" one two three four five six");
  ASSERT_GE(words.size(), 6u);
  Out out = Run(prompt, words, WithReasoning(prompt, /*max=*/4));
  ASSERT_GE(out.ids.size(), 4u);
  EXPECT_EQ(out.ids[3], kClose);  // the 4th reasoning token is </think>, whatever was sampled
  EXPECT_EQ(out.reasoning_tokens, 4);
  EXPECT_EQ(out.reasoning, rt_->tokenizer()->Decode({words[0], words[1], words[2]}));
  EXPECT_EQ(out.answer, rt_->tokenizer()->Decode({words.begin() + 4, words.end()}));

  // The host-sampling path: logits that favour another token lose to the limit.
  GenerationOptions o = WithReasoning(prompt, /*max=*/1);
  auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt, o);
  ASSERT_TRUE(g.ok());
  std::vector<float> logits(rt_->config().vocab_size, 0.0f);
  logits[42] = 100.0f;
  TokenEvent ev = (*g)->Advance(static_cast<int32_t>(prompt.size()), logits);
  EXPECT_EQ(ev.id, kClose);
  EXPECT_EQ((*g)->Advance(1, logits).id, 42);
}

TEST_F(ReasoningTest, StopStringsMatchWithinAPartNeverAcrossTheBoundary) {
  const std::vector<int32_t> prompt = Ids("q");
  GenerationOptions o = WithReasoning(prompt);
  o.stop = {"xy"};
  // "x" ends the reasoning (held back as a possible stop), "y" starts the answer.
  Out across = Run(prompt, Cat(Cat(Ids("ax"), {kClose}), Ids("yb")), o);
  EXPECT_EQ(across.reasoning, "ax");
  EXPECT_EQ(across.answer, "yb");
  EXPECT_EQ(across.finish, FinishReason::kNone);  // still running: no stop matched
  // Within the reasoning it stops, as anywhere else in the stream.
  Out within = Run(prompt, Cat(Ids("a xy b"), {kClose}), o);
  EXPECT_EQ(within.finish, FinishReason::kStopSequence);
  EXPECT_EQ(within.reasoning, "a ");
}

TEST_F(ReasoningTest, BrokenUtf8AtTheBoundaryIsFlushedIntoTheReasoning) {
  const std::vector<int32_t> prompt = Ids("q");
  // "é" is C3 A9: its first byte alone, then the block closes.
  const std::vector<int32_t> e_acute = Ids("é");
  std::vector<int32_t> first_byte;
  for (int32_t id = 0; id < 256 && first_byte.empty(); ++id) {
    if (rt_->tokenizer()->TokenBytes(id) == "\xC3") first_byte.push_back(id);
  }
  ASSERT_EQ(first_byte.size(), 1u);
  Out out = Run(prompt, Cat(Cat(Ids("a"), first_byte), Cat({kClose}, Ids("b"))), WithReasoning(prompt));
  EXPECT_EQ(out.reasoning, "a\xEF\xBF\xBD");  // U+FFFD, not held over into the answer
  EXPECT_EQ(out.answer, "b");
}

TEST_F(ReasoningTest, EndOfSequenceInsideTheReasoningEndsIt) {
  const std::vector<int32_t> prompt = Ids("q");
  Out out = Run(prompt, Cat(Ids("thinking"), {rt_->tokenizer()->eos_id()}), WithReasoning(prompt));
  EXPECT_EQ(out.finish, FinishReason::kEos);
  EXPECT_EQ(out.reasoning, "thinking");
  EXPECT_EQ(out.answer, "");
}

TEST_F(ReasoningTest, WithoutAParserEverythingIsAnswerAndALimitIsRefused) {
  const std::vector<int32_t> prompt = Ids("q");
  Out out = Run(prompt, Cat(Cat(Ids("a"), {kClose}), Ids("b")), GenerationOptions());
  EXPECT_EQ(out.answer, "a</think>b");
  EXPECT_EQ(out.reasoning_tokens, 0);
  GenerationOptions o;
  o.reasoning.max_reasoning_tokens = 3;
  absl::Status s = o.Validate(rt_->config().vocab_size);
  EXPECT_THAT(s.message(), HasSubstr("max_reasoning_tokens: this model has no reasoning parser"));
  o = WithReasoning(prompt, -1);
  EXPECT_THAT(o.Validate(rt_->config().vocab_size).message(), HasSubstr("max_reasoning_tokens: must be >= 0"));
}

}  // namespace
}  // namespace beacon
