// Structured output in a Generation on the real default model: what a
// grammar constrains comes out matching it (JSON that parses and has the
// schema's keys and types, a regex, one of the choices), greedy and sampled,
// several sequences in one batch; the reasoning before the answer is never
// masked; forced tokens and a grammar of another vocabulary are refused.
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class GenerationGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH;
    cache_ = *rt_->MakeKvCache(4096);
    auto c = GrammarCompiler::Create(*rt_->tokenizer(), rt_->config().vocab_size, GrammarCompilerOptions());
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = std::move(*c);
  }

  std::shared_ptr<const CompiledGrammar> Compile(GrammarKind kind, std::string source,
                                                 std::vector<std::string> choices = {}) {
    GrammarSpec s;
    s.kind = kind;
    s.source = std::move(source);
    s.choices = std::move(choices);
    auto g = compiler_->Compile(s);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : nullptr;
  }

  struct Out {
    std::string answer, reasoning;
    std::vector<int32_t> ids;
    FinishReason finish = FinishReason::kNone;
  };
  // Runs the generations of `prompts` x `options` together to their ends.
  std::vector<Out> Run(const std::vector<std::string>& prompts, const std::vector<GenerationOptions>& options) {
    std::vector<std::unique_ptr<Generation>> owned;
    std::vector<Generation*> gens;
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto prompt = rt_->EncodePrompt(prompts[i], /*chat=*/true, "");
      EXPECT_TRUE(prompt.ok());
      auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), *prompt, options[i]);
      EXPECT_TRUE(g.ok()) << g.status();
      if (!g.ok()) return {};
      gens.push_back(g->get());
      owned.push_back(std::move(*g));
    }
    std::vector<Out> out(gens.size());
    EXPECT_TRUE(RunToCompletion(rt_->backend(), gens, BatchRunnerOptions(), [&](size_t i, const TokenEvent& ev) {
                  if (ev.id >= 0) out[i].ids.push_back(ev.id);
                  (ev.part == TextPart::kReasoning ? out[i].reasoning : out[i].answer) += ev.text;
                }).ok());
    for (size_t i = 0; i < gens.size(); ++i) {
      out[i].finish = gens[i]->finish_reason();
      EXPECT_NE(out[i].finish, FinishReason::kError) << gens[i]->error();
    }
    EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
    return out;
  }

  Runtime* rt_ = nullptr;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<GrammarCompiler> compiler_;
};

constexpr char kPersonSchema[] = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
    "colours": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3}},
    "required": ["name", "age", "colours"]})";

void ExpectPerson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << text;
  EXPECT_TRUE(j["name"].is_string()) << text;
  EXPECT_TRUE(j["age"].is_number_integer()) << text;
  ASSERT_TRUE(j["colours"].is_array()) << text;
  for (const auto& c : j["colours"]) EXPECT_TRUE(c == "red" || c == "green" || c == "blue") << text;
  EXPECT_EQ(j.size(), 3u) << text;  // strict: no other keys
}

TEST_F(GenerationGrammarTest, BatchOfGrammarsGreedyAndSampled) {
  GenerationOptions schema, regex, choice, sampled, free;
  schema.grammar = Compile(GrammarKind::kJsonSchema, kPersonSchema);
  regex.grammar = Compile(GrammarKind::kRegex, "[0-9]{3}-[0-9]{4}");
  choice.grammar = Compile(GrammarKind::kChoice, "", {"positive", "negative", "neutral"});
  sampled = schema;
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.seed = 7;
  for (GenerationOptions* o : {&schema, &regex, &choice, &sampled, &free}) o->max_tokens = 160;
  const std::vector<Out> out =
      Run({"Describe a person as JSON.", "Give me a phone number.", "Is 'I love it' positive or negative?",
           "Describe a person as JSON.", "Describe a person as JSON."},
          {schema, regex, choice, sampled, free});
  ASSERT_EQ(out.size(), 5u);
  ExpectPerson(out[0].answer);
  ExpectPerson(out[3].answer);
  EXPECT_TRUE(std::regex_match(out[1].answer, std::regex("[0-9]{3}-[0-9]{4}"))) << out[1].answer;
  EXPECT_TRUE(out[2].answer == "positive" || out[2].answer == "negative" || out[2].answer == "neutral")
      << out[2].answer;
  for (int i : {0, 1, 2, 3}) EXPECT_EQ(out[i].finish, FinishReason::kEos) << i << ": " << out[i].answer;
  // The unconstrained neighbour is what it is alone: the masks touch only their own rows.
  const std::vector<Out> alone = Run({"Describe a person as JSON."}, {free});
  EXPECT_EQ(alone[0].ids, out[4].ids);
}

TEST_F(GenerationGrammarTest, ReasoningIsNeverMasked) {
  // A reasoning block made of two ordinary tokens, closed by force after 6
  // tokens: those come out as without a grammar; the answer after matches it.
  const Tokenizer& tok = *rt_->tokenizer();
  ReasoningOptions r;
  r.syntax.parser = ReasoningParser::kDeepSeekR1;
  r.syntax.open_id = tok.Encode("<think>", false, false).front();
  r.syntax.close_id = tok.Encode(" zebra", false, false).front();
  r.starts_inside = true;
  r.max_reasoning_tokens = 6;
  GenerationOptions free, constrained;
  free.reasoning = constrained.reasoning = r;
  free.max_tokens = constrained.max_tokens = 40;
  constrained.grammar = Compile(GrammarKind::kRegex, "(yes|no)");
  const std::vector<Out> out =
      Run({"Is the sky blue? Think first.", "Is the sky blue? Think first."}, {free, constrained});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_GE(out[1].ids.size(), 7u);
  EXPECT_EQ(std::vector<int32_t>(out[0].ids.begin(), out[0].ids.begin() + 6),
            std::vector<int32_t>(out[1].ids.begin(), out[1].ids.begin() + 6));
  EXPECT_EQ(out[0].reasoning, out[1].reasoning);
  EXPECT_FALSE(out[1].reasoning.empty());
  EXPECT_TRUE(out[1].answer == "yes" || out[1].answer == "no") << out[1].answer;
}

// min_tokens bans the end tokens; a grammar that can only end (the choice
// is complete) wins over it: the sequence ends short of min_tokens on its
// end token. Before, the ban and the mask together left no token: greedy
// drew id 0 (an end token on this model by chance, "!" on Qwen2.5) and
// sampling drew any token of the vocabulary, which the grammar refused (an
// error).
TEST_F(GenerationGrammarTest, AGrammarThatCanOnlyEndWinsOverMinTokens) {
  GenerationOptions greedy;
  greedy.grammar = Compile(GrammarKind::kChoice, "", {"yes", "no"});
  greedy.max_tokens = 64;
  greedy.min_tokens = 32;
  GenerationOptions sampled = greedy;
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.seed = 7;
  GenerationOptions free = greedy;
  free.grammar = nullptr;
  const std::string q = "Answer yes or no: is water wet?";
  const std::vector<Out> out = Run({q, q, "Count to three."}, {greedy, sampled, free});
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(out[i].answer == "yes" || out[i].answer == "no") << i << ": " << out[i].answer;
    EXPECT_EQ(out[i].finish, FinishReason::kEos) << i;
    ASSERT_GE(out[i].ids.size(), 2u);
    ASSERT_LT(out[i].ids.size(), 32u);
    EXPECT_TRUE(rt_->tokenizer()->IsEndOfGeneration(out[i].ids.back())) << ::testing::PrintToString(out[i].ids);
  }
  // Without a grammar min_tokens holds as before.
  EXPECT_GE(out[2].ids.size(), 32u);
}

TEST_F(GenerationGrammarTest, RefusesForcedTokensAndAnotherVocabulary) {
  GenerationOptions o;
  o.grammar = Compile(GrammarKind::kRegex, "a");
  o.forced_tokens = {1};
  auto prompt = *rt_->EncodePrompt("hi", true, "");
  auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt, o);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(absl::StrContains(g.status().message(), "forced_tokens")) << g.status();

  auto other = GrammarCompiler::Create(*rt_->tokenizer(), rt_->config().vocab_size + 64, GrammarCompilerOptions());
  ASSERT_TRUE(other.ok());
  GrammarSpec s;
  s.kind = GrammarKind::kRegex;
  s.source = "a";
  GenerationOptions o2;
  o2.grammar = *(*other)->Compile(s);
  auto g2 = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt, o2);
  ASSERT_FALSE(g2.ok());
  EXPECT_TRUE(absl::StrContains(g2.status().message(), "grammar: compiled for a vocabulary")) << g2.status();
}

}  // namespace
}  // namespace beacon
