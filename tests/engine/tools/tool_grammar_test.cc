// The grammars of forced tool calls, compiled by xgrammar for the default
// model's vocabulary: a valid call in the model's format is accepted token
// by token; a call of another function, arguments of the wrong type, or text
// where a call must be are refused; auto with constrain_tool_calls lets text
// through until a call begins.
#include "engine/tools/tool_grammar.h"

#include <filesystem>
#include <memory>

#include "engine/grammar/grammar_compiler.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/tools/tool_format.h"
#include "gtest/gtest.h"
#include "model/tokenizer_loader.h"

namespace beacon {
namespace {

class ToolGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(BEACON_MODEL_PATH)) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
    auto data = LoadTokenizerData(BEACON_MODEL_PATH);
    ASSERT_TRUE(data.ok()) << data.status();
    auto tok = Tokenizer::Create(std::move(*data));
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
    auto c = GrammarCompiler::Create(*tok_, tok_->vocab_size(), GrammarCompilerOptions());
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = std::move(*c);
    tools_.tools = {{"get_weather", "", R"({"type": "object", "properties": {"city": {"type": "string"}},
                                           "required": ["city"]})"},
                    {"get_time", "", "{}"}};
  }

  // Whether the whole of `text` is accepted (and may end there).
  bool Accepts(ToolCallFormat f, const ToolRequest& t, const std::string& text) {
    std::optional<GrammarSpec> spec = ToolGrammar(f, t);
    EXPECT_TRUE(spec.has_value());
    if (!spec.has_value()) return false;
    auto g = compiler_->Compile(*spec);
    EXPECT_TRUE(g.ok()) << g.status() << "\n" << spec->source;
    if (!g.ok()) return false;
    GrammarMatcher m(*g);
    std::vector<uint32_t> mask(static_cast<size_t>(MaskWords(m.vocab_size())));
    for (int32_t id : tok_->Encode(text, false, false)) {
      if (!m.FillNextTokenMask(mask) || !MaskAllows(mask, id) || !m.Accept(id)) return false;
    }
    return m.can_end();
  }

  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<GrammarCompiler> compiler_;
  ToolRequest tools_;
};

TEST_F(ToolGrammarTest, RequiredAndNamedInEachFormat) {
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kDeepSeekR1}) {
    SCOPED_TRACE(ToolCallFormatName(f));
    ToolRequest required = tools_;
    required.choice.mode = ToolChoice::Mode::kRequired;
    const std::string weather = FormatToolCall(f, "get_weather", R"({"city": "Paris"})");
    const std::string time = FormatToolCall(f, "get_time", "{}");
    EXPECT_TRUE(Accepts(f, required, weather));
    EXPECT_FALSE(Accepts(f, required, "It is sunny."));
    EXPECT_FALSE(Accepts(f, required, FormatToolCall(f, "get_weather", R"({"city": 3})")));
    EXPECT_FALSE(Accepts(f, required, FormatToolCall(f, "get_news", "{}")));
    const std::string sep = f == ToolCallFormat::kLlama3Json ? "; " : "\n";
    EXPECT_TRUE(Accepts(f, required, weather + sep + time));  // parallel calls
    required.parallel = false;
    EXPECT_FALSE(Accepts(f, required, weather + sep + time));

    ToolRequest named = tools_;
    named.choice = {ToolChoice::Mode::kNamed, "get_time"};
    EXPECT_TRUE(Accepts(f, named, time));
    EXPECT_FALSE(Accepts(f, named, weather));
  }
}

TEST_F(ToolGrammarTest, AutoNeedsNoGrammarUnlessConstrained) {
  ToolRequest autos = tools_;
  EXPECT_FALSE(ToolGrammar(ToolCallFormat::kHermes, autos).has_value());
  autos.choice.mode = ToolChoice::Mode::kNone;
  autos.constrain_auto = true;
  EXPECT_FALSE(ToolGrammar(ToolCallFormat::kHermes, autos).has_value());
  autos.choice.mode = ToolChoice::Mode::kAuto;
  const ToolCallFormat f = ToolCallFormat::kHermes;
  EXPECT_TRUE(Accepts(f, autos, "Sure, it is sunny."));
  EXPECT_TRUE(Accepts(f, autos, "Checking. " + FormatToolCall(f, "get_weather", R"({"city": "Oslo"})")));
  EXPECT_FALSE(Accepts(f, autos, "Checking. " + FormatToolCall(f, "get_weather", R"({"town": "Oslo"})")));
  // A ```json fence is a call under the grammar too (the parser reads it as one).
  EXPECT_TRUE(
      Accepts(f, autos, "Sure.\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```"));
  EXPECT_FALSE(Accepts(f, autos, "Sure.\n```json\n{\"a\": 1}\n```"));
}

}  // namespace
}  // namespace beacon
