// Real model templates (tests/fixtures/chat_templates/*.jinja) rendered by
// our engine against jinja2's renderings in HF's environment
// (cases.jsonl, written by tools/make_chat_template_fixtures.py): byte
// equality, and an error wherever jinja2 raised one.
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "engine/tokenizer/jinja/template.h"
#include "gtest/gtest.h"

namespace beacon::jinja {
namespace {

std::string FixtureDir() { return std::string(BEACON_SOURCE_DIR) + "/tests/fixtures/chat_templates/"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RealTemplates, RenderLikeJinja2) {
  std::ifstream in(FixtureDir() + "cases.jsonl");
  ASSERT_TRUE(in) << "missing fixture; run tools/make_chat_template_fixtures.py";
  std::map<std::string, Template> templates;
  std::map<std::string, int> rendered;
  int errors = 0;
  std::string line;
  while (std::getline(in, line)) {
    const Json row = Json::parse(line);  // ordered: tojson must keep the key order
    const std::string name = row.at("template").get<std::string>();
    SCOPED_TRACE(row.at("name").get<std::string>());
    if (!templates.count(name)) {
      absl::StatusOr<Template> t = Template::Parse(ReadFile(FixtureDir() + name + ".jinja"));
      ASSERT_TRUE(t.ok()) << t.status();
      templates.emplace(name, *std::move(t));
    }
    absl::StatusOr<std::string> out = templates.at(name).Render(row.at("vars"));
    if (row.contains("error")) {
      // jinja2's own messages (Python's TypeError text) are not reproduced;
      // that it fails, and how, is.
      ASSERT_FALSE(out.ok()) << "jinja2 failed with: " << row.at("error");
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
      ++errors;
      continue;
    }
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, row.at("rendered").get<std::string>());
    ++rendered[name];
  }
  EXPECT_GE(rendered["smollm2"], 30);
  EXPECT_GE(rendered["r1_qwen"], 30);
  EXPECT_GE(errors, 1);
}

}  // namespace
}  // namespace beacon::jinja
