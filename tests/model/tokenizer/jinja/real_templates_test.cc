// Real model templates (tests/fixtures/chat_templates/*.jinja: the default
// model's, DeepSeek-R1-Distill-Qwen-7B's, and llama.cpp's collection from the
// llama-cpp-python sdist) rendered by our engine against jinja2's renderings
// in HF's environment (cases.jsonl, written by
// tools/make_chat_template_fixtures.py): byte equality on every row, and an
// error wherever jinja2 raised one, carrying the template's own message when
// it was raise_exception. Rows whose rendering called strftime_now carry the
// instant the oracle formatted ("now"), passed here the same way.
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/jinja/template.h"

namespace beacon::jinja {
namespace {

using ::testing::HasSubstr;

std::string FixtureDir() { return std::string(BEACON_SOURCE_DIR) + "/tests/fixtures/chat_templates/"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RealTemplates, RenderLikeJinja2) {
  std::ifstream in(FixtureDir() + "cases.jsonl");
  ASSERT_TRUE(in) << "missing fixture; run make chat-template-fixtures";
  std::map<std::string, std::optional<Template>> templates;  // nullopt: did not parse (reported once)
  std::map<std::string, int> rendered;
  int rows = 0, raised = 0, other_errors = 0, clocked = 0;
  for (std::string line; std::getline(in, line);) {
    ++rows;
    const Json row = Json::parse(line);  // ordered: tojson must keep the key order
    const std::string name = row.at("template").get<std::string>();
    SCOPED_TRACE(row.at("name").get<std::string>());
    if (!templates.count(name)) {
      absl::StatusOr<Template> t = Template::Parse(ReadFile(FixtureDir() + name + ".jinja"));
      EXPECT_TRUE(t.ok()) << name << ": " << t.status();
      templates[name] = t.ok() ? std::optional<Template>(*std::move(t)) : std::nullopt;
    }
    if (!templates[name]) continue;
    std::optional<int64_t> now;
    if (row.contains("now")) {
      now = row.at("now").get<int64_t>();
      ++clocked;
    }
    absl::StatusOr<std::string> out = templates[name]->Render(row.at("vars"), RenderLimits(), now);
    if (row.contains("error")) {
      EXPECT_FALSE(out.ok()) << "jinja2 failed with: " << row.at("error");
      if (out.ok()) continue;
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
      if (row.at("error_kind") == "raise_exception") {
        // The template's own message, as the client will see it.
        EXPECT_THAT(out.status().message(), HasSubstr(row.at("error").get<std::string>()));
        ++raised;
      } else {
        // Python's exception text (a TypeError, an UndefinedError) is not
        // reproduced; that it fails is.
        ++other_errors;
      }
      continue;
    }
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) continue;
    EXPECT_EQ(*out, row.at("rendered").get<std::string>());
    ++rendered[name];
  }
  EXPECT_GE(rows, 600);
  EXPECT_GE(raised, 20);
  EXPECT_GE(clocked, 40);
  for (const char* name : {"smollm2", "r1_qwen", "Qwen-Qwen3-0.6B", "Qwen-QwQ-32B", "Qwen-Qwen2.5-7B-Instruct",
                           "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
                           "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
                           "google-gemma-2-2b-it", "HuggingFaceTB-SmolLM3-3B"}) {
    EXPECT_GE(rendered[name], 30) << name;
  }
  std::cout << rows << " rows: " << raised << " raise_exception, " << other_errors << " other errors, " << clocked
            << " with a fixed clock\n";
}

// The fixed clock is UTC and formats with C's strftime, as Python's does.
TEST(RealTemplates, FixedClock) {
  absl::StatusOr<Template> t = Template::Parse("{{ strftime_now('%d %b %Y %H:%M') }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render(Json::object(), RenderLimits(), 1773446400), "14 Mar 2026 00:00");
  EXPECT_TRUE(t->Render(Json::object()).ok());  // the real clock
}

}  // namespace
}  // namespace beacon::jinja
