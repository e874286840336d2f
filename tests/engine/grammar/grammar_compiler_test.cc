// GrammarCompiler and GrammarMatcher on the default model's real vocabulary:
// specs are refused by field before and by xgrammar at compile time, the
// cache serves a repeated spec, the queue and the timeout bound the work, and
// a matcher walked along a valid text accepts exactly its tokens.
#include "engine/grammar/grammar_compiler.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"
#include "model/tokenizer_loader.h"
#include "util/log.h"

namespace beacon {
namespace {

const Tokenizer* DefaultTokenizer() {
  static std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    if (!std::filesystem::exists(BEACON_MODEL_PATH)) return nullptr;
    auto data = LoadTokenizerData(BEACON_MODEL_PATH);
    EXPECT_TRUE(data.ok()) << data.status();
    if (!data.ok()) return nullptr;
    auto t = Tokenizer::Create(std::move(*data));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(*t) : nullptr;
  }();
  return tok.get();
}

#define REQUIRE_TOKENIZER()                                                \
  const Tokenizer* tok = DefaultTokenizer();                               \
  if (tok == nullptr) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH; \
  (void)tok

GrammarSpec Spec(GrammarKind kind, std::string source, std::string field = "response_format") {
  GrammarSpec s;
  s.kind = kind;
  s.source = std::move(source);
  s.field = std::move(field);
  return s;
}

// Feeds `text`'s tokens to a matcher; each must be allowed by the mask
// before it and accepted. Returns how many were.
int WalkText(const Tokenizer& tok, std::shared_ptr<const CompiledGrammar> g, const std::string& text,
             GrammarMatcher* m) {
  std::vector<uint32_t> mask(static_cast<size_t>(MaskWords(m->vocab_size())));
  int n = 0;
  for (int32_t id : tok.Encode(text, false, false)) {
    EXPECT_TRUE(m->FillNextTokenMask(mask));
    if (!MaskAllows(mask, id) || !m->Accept(id)) return n;
    ++n;
  }
  return n;
}

TEST(GrammarCompiler, SchemaConstrainsTokens) {
  REQUIRE_TOKENIZER();
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), GrammarCompilerOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  auto g = (*c)->Compile(Spec(GrammarKind::kJsonSchema,
                              R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
                                  "required":["name","age"]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  {
    GrammarMatcher m(*g);
    const std::string ok = R"({"name": "Ada", "age": 36})";
    EXPECT_EQ(WalkText(*tok, *g, ok, &m), static_cast<int>(tok->Encode(ok, false, false).size()));
    EXPECT_TRUE(m.can_end());
    // Only an end token may follow; it terminates the grammar.
    std::vector<uint32_t> mask(static_cast<size_t>(MaskWords(m.vocab_size())));
    ASSERT_TRUE(m.FillNextTokenMask(mask));
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      if (MaskAllows(mask, id)) {
        EXPECT_TRUE(tok->IsEndOfGeneration(id)) << id;
      }
    }
    EXPECT_TRUE(m.Accept(tok->eos_id()) || m.terminated());
  }
  {
    GrammarMatcher m(*g);
    // "age" before "name" breaks the schema's order; a string age its type.
    const std::string bad = R"({"name": "Ada", "age": "36"})";
    EXPECT_LT(WalkText(*tok, *g, bad, &m), static_cast<int>(tok->Encode(bad, false, false).size()));
  }
}

TEST(GrammarCompiler, EveryKindCompiles) {
  REQUIRE_TOKENIZER();
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), GrammarCompilerOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  GrammarSpec choice;
  choice.kind = GrammarKind::kChoice;
  choice.choices = {"yes", "no", "say \"maybe\"\n"};
  choice.field = "structured_outputs.choice";
  const std::vector<std::pair<GrammarSpec, std::string>> cases = {
      {Spec(GrammarKind::kJsonObject, ""), R"({"a": [1, 2]})"},
      {Spec(GrammarKind::kRegex, "[A-Z]{3}-[0-9]{4}"), "ABC-1234"},
      {Spec(GrammarKind::kEbnf, R"(root ::= "x" [0-9]+)"), "x42"},
      {choice, "say \"maybe\"\n"},
      {Spec(GrammarKind::kStructuralTag,
            R"({"type": "structural_tag", "format": {"type": "tag", "begin": "<a>",
                "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</a>"}})"),
       "<a>12</a>"},
  };
  for (const auto& [spec, text] : cases) {
    auto g = (*c)->Compile(spec);
    ASSERT_TRUE(g.ok()) << GrammarKindName(spec.kind) << ": " << g.status();
    GrammarMatcher m(*g);
    EXPECT_EQ(WalkText(*tok, *g, text, &m), static_cast<int>(tok->Encode(text, false, false).size()))
        << GrammarKindName(spec.kind);
    EXPECT_TRUE(m.can_end()) << GrammarKindName(spec.kind);
  }
}

TEST(GrammarCompiler, RefusesNamingTheField) {
  REQUIRE_TOKENIZER();
  GrammarCompilerOptions o;
  o.limits.max_source_bytes = 1000;
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), o);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const GrammarSpec& s : {Spec(GrammarKind::kJsonSchema, R"({"type": "no-such-type"})", "response_format.x"),
                               Spec(GrammarKind::kJsonSchema, "{not json", "response_format.x"),
                               Spec(GrammarKind::kEbnf, "root ::= undefined_rule", "response_format.x"),
                               Spec(GrammarKind::kRegex, "(unclosed", "response_format.x"),
                               Spec(GrammarKind::kRegex, std::string(1001, 'a'), "response_format.x"),
                               Spec(GrammarKind::kRegex, "", "response_format.x")}) {
    auto g = (*c)->Compile(s);
    ASSERT_FALSE(g.ok()) << s.source;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_TRUE(absl::StartsWith(g.status().message(), "response_format.x: ")) << g.status();
  }
  GrammarSpec none;
  none.kind = GrammarKind::kChoice;
  none.field = "structured_outputs.choice";
  EXPECT_EQ((*c)->Compile(none).status().code(), absl::StatusCode::kInvalidArgument);
  // The compiler is still usable after refusals.
  EXPECT_TRUE((*c)->Compile(Spec(GrammarKind::kRegex, "a+")).ok());
}

// xgrammar compiles some constructs looser than written and says so only in a
// warning (engine/grammar/xgrammar_log.h). Where the request asked for the
// grammar exactly (a strict schema, any regex) that is a refusal naming the
// field and what xgrammar would drop; otherwise the grammar compiles and the
// warning is logged once, with the field.
std::vector<std::string>* logged = nullptr;
void KeepRecord(const logging::Record& r) {
  if (logged != nullptr) logged->emplace_back(r.message);
}

TEST(GrammarCompiler, ALooserCompileIsRefusedWhereTheRequestAskedForExactness) {
  REQUIRE_TOKENIZER();
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), GrammarCompilerOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  // Overlapping branches: xgrammar can only make this anyOf.
  const std::string one_of = R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})";
  GrammarSpec strict = Spec(GrammarKind::kJsonSchema, one_of, "response_format.json_schema.schema");
  auto g = (*c)->Compile(strict);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_TRUE(absl::StartsWith(g.status().message(),
                               "response_format.json_schema.schema: strict: the schema would not be enforced"))
      << g.status();
  EXPECT_TRUE(absl::StrContains(g.status().message(), "oneOf")) << g.status();
  // An anchor in the middle (ignored), an escape xgrammar does not know (matched literally).
  for (const std::string& regex : {std::string("a^b"), std::string(R"(x\qy)")}) {
    auto r = (*c)->Compile(Spec(GrammarKind::kRegex, regex, "structured_outputs.regex"));
    ASSERT_FALSE(r.ok()) << regex;
    EXPECT_TRUE(absl::StartsWith(r.status().message(), "structured_outputs.regex: the regex would not be enforced"))
        << r.status();
  }

  // Not strict: compiled, and the warning logged with the field, once.
  std::vector<std::string> records;
  logged = &records;
  logging::SetBackend(KeepRecord);
  GrammarSpec loose = strict;
  loose.strict = false;
  auto l1 = (*c)->Compile(loose);
  auto l2 = (*c)->Compile(loose);  // from the cache: not logged again
  logging::SetBackend(nullptr);
  logged = nullptr;
  ASSERT_TRUE(l1.ok() && l2.ok()) << l1.status();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(records[0], "response_format.json_schema.schema: the json_schema compiled looser"))
      << records[0];
  EXPECT_TRUE(absl::StrContains(records[0], "xgrammar warning: oneOf")) << records[0];
  // CheckEnforced: the same finding from the schema's conversion alone (for a
  // strict tool's parameters inside a larger grammar), naming the field.
  absl::Status e = (*c)->CheckEnforced(strict);
  EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument) << e;
  EXPECT_TRUE(absl::StartsWith(e.message(), "response_format.json_schema.schema: strict: the schema")) << e;
  EXPECT_TRUE((*c)->CheckEnforced(loose).ok());
  EXPECT_TRUE((*c)->CheckEnforced(Spec(GrammarKind::kJsonSchema, R"({"type": "integer"})")).ok());
  EXPECT_EQ((*c)->CheckEnforced(Spec(GrammarKind::kJsonSchema, "{not json", "tools[0].function.parameters")).code(),
            absl::StatusCode::kInvalidArgument);
  // A schema xgrammar enforces as written still compiles strict.
  EXPECT_TRUE(
      (*c)->Compile(Spec(GrammarKind::kJsonSchema, R"({"anyOf": [{"type": "integer"}, {"type": "string"}]})")).ok());
}

// A refusal is kept by the spec's key: the same spec sent again (under any
// field) is refused from memory, naming its own field, without a compile.
TEST(GrammarCompiler, ARefusedSpecIsAnsweredAgainWithoutACompile) {
  REQUIRE_TOKENIZER();
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), GrammarCompilerOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string one_of = R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})";
  auto first = (*c)->Compile(Spec(GrammarKind::kJsonSchema, one_of, "response_format.json_schema.schema"));
  ASSERT_FALSE(first.ok());
  const GrammarCompiler::Stats before = (*c)->stats();
  EXPECT_EQ(before.compiles, 1);
  EXPECT_EQ(before.errors, 1);
  auto again = (*c)->Compile(Spec(GrammarKind::kJsonSchema, one_of, "tools[0].function.parameters"));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::StartsWith(again.status().message(), "tools[0].function.parameters: strict: the schema"))
      << again.status();
  EXPECT_EQ(absl::StripPrefix(again.status().message(), "tools[0].function.parameters"),
            absl::StripPrefix(first.status().message(), "response_format.json_schema.schema"));
  const GrammarCompiler::Stats after = (*c)->stats();
  EXPECT_EQ(after.compiles, before.compiles) << "a kept refusal compiles nothing";
  EXPECT_EQ(after.hits, before.hits + 1);
  // CheckEnforced reads the same verdict, and keeps its own: the same answer twice.
  EXPECT_EQ((*c)->CheckEnforced(Spec(GrammarKind::kJsonSchema, one_of, "x")).code(),
            absl::StatusCode::kInvalidArgument);
  const std::string fine = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  EXPECT_TRUE((*c)->CheckEnforced(Spec(GrammarKind::kJsonSchema, fine, "tools[1].function.parameters")).ok());
  EXPECT_TRUE((*c)->CheckEnforced(Spec(GrammarKind::kJsonSchema, fine, "tools[1].function.parameters")).ok());
  // A spec that is not refused still compiles (the verdict "" is no refusal).
  EXPECT_TRUE((*c)->Compile(Spec(GrammarKind::kJsonSchema, fine)).ok());
}

TEST(GrammarCompiler, CachesAndBoundsTheCache) {
  REQUIRE_TOKENIZER();
  GrammarCompilerOptions o;
  o.cache_entries = 2;
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto a1 = (*c)->Compile(Spec(GrammarKind::kRegex, "a+"));
  auto a2 = (*c)->Compile(Spec(GrammarKind::kRegex, "a+", "structured_outputs.regex"));
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->get(), a2->get());  // one compile, the field is not part of the key
  EXPECT_EQ((*c)->stats().compiles, 1);
  EXPECT_EQ((*c)->stats().hits, 1);
  ASSERT_TRUE((*c)->Compile(Spec(GrammarKind::kRegex, "b+")).ok());
  ASSERT_TRUE((*c)->Compile(Spec(GrammarKind::kRegex, "c+")).ok());
  EXPECT_EQ((*c)->stats().cached, 2);
  EXPECT_GT((*c)->stats().cache_bytes, 0);
  ASSERT_TRUE((*c)->Compile(Spec(GrammarKind::kRegex, "a+")).ok());  // evicted: compiled again
  EXPECT_EQ((*c)->stats().compiles, 4);
}

TEST(GrammarCompiler, TimeoutAndQueueBoundTheWork) {
  REQUIRE_TOKENIZER();
  GrammarCompilerOptions o;
  o.compile_timeout_ms = 1;
  o.compile_threads = 1;
  o.max_queued = 1;
  auto c = GrammarCompiler::Create(*tok, tok->vocab_size(), o);
  ASSERT_TRUE(c.ok()) << c.status();
  // A schema over a 150k vocabulary takes far more than 1 ms to compile.
  const std::string schema = R"({"type":"object","properties":{"p":{"type":"string","pattern":"[a-z]{2,9}"}}})";
  auto g = (*c)->Compile(Spec(GrammarKind::kJsonSchema, schema, "response_format.json_schema.schema"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(g.status().message(), "response_format.json_schema.schema: compiling")) << g.status();
  EXPECT_EQ((*c)->stats().timeouts, 1);
  // Two more distinct specs while the first may still run: one waits in the
  // queue, the next is turned away at once unless a thread freed up.
  auto g2 = (*c)->Compile(Spec(GrammarKind::kJsonSchema, R"({"type":"array"})"));
  auto g3 = (*c)->Compile(Spec(GrammarKind::kJsonSchema, R"({"type":"boolean"})"));
  for (const auto& r : {g2, g3}) {
    if (!r.ok()) {
      EXPECT_TRUE(r.status().code() == absl::StatusCode::kInvalidArgument ||
                  r.status().code() == absl::StatusCode::kResourceExhausted)
          << r.status();
    }
  }
}

}  // namespace
}  // namespace beacon
