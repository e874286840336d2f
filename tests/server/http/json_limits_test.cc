// ParseJsonBounded: nesting and value counts are refused with the limit
// named, before a tree is built; bodies within the limits parse as
// json::parse would.
#include "server/http/json_limits.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

void ExpectRefused(const absl::StatusOr<json>& j, const std::string& needle) {
  ASSERT_FALSE(j.ok()) << "accepted; expected an error containing " << needle;
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument) << j.status();
  EXPECT_THAT(std::string(j.status().message()), HasSubstr(needle));
}

TEST(JsonLimitsTest, ParsesBodiesWithinTheLimits) {
  absl::StatusOr<json> j = ParseJsonBounded(R"({"prompt": [1, 2, 3], "n": 1, "stop": ["a"], "x": null})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["prompt"], json({1, 2, 3}));
  EXPECT_EQ((*j)["stop"][0], "a");
  EXPECT_TRUE((*j)["x"].is_null());
  j = ParseJsonBounded("18446744073709551615");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->get<uint64_t>(), 18446744073709551615ull);
}

TEST(JsonLimitsTest, DepthJustUnderAndOverTheLimit) {
  JsonLimits limits;  // depth 64
  EXPECT_TRUE(ParseJsonBounded(Nested(64), limits).ok());
  ExpectRefused(ParseJsonBounded(Nested(65), limits), "JSON nesting deeper than 64 levels");
  // Objects count as levels too, mixed with arrays.
  std::string mixed;
  for (int i = 0; i < 33; ++i) mixed += R"({"a":[)";
  for (int i = 0; i < 33; ++i) mixed += "]}";
  ExpectRefused(ParseJsonBounded(mixed, limits), "deeper than 64");
  limits.max_depth = 3;
  EXPECT_TRUE(ParseJsonBounded(R"({"messages": [{"role": "user"}]})", limits).ok());
  ExpectRefused(ParseJsonBounded(R"({"messages": [{"content": [{}]}]})", limits), "deeper than 3 levels");
}

TEST(JsonLimitsTest, ValueCountJustUnderAndOverTheLimit) {
  JsonLimits limits;
  limits.max_values = 5;
  // The array and its 4 elements: 5 values.
  EXPECT_TRUE(ParseJsonBounded("[1, 2.5, \"x\", null]", limits).ok());
  ExpectRefused(ParseJsonBounded("[1, 2, 3, 4, 5]", limits), "JSON with more than 5 values");
  ExpectRefused(ParseJsonBounded(R"({"a": {}, "b": [], "c": [true, false]})", limits), "more than 5 values");

  // The default admits a prompt of a million token ids and not much more.
  limits = JsonLimits();
  std::string ids = "[0";
  for (int64_t i = 1; i < limits.max_values - 1; ++i) ids += ",0";
  EXPECT_TRUE(ParseJsonBounded(ids + "]", limits).ok());
  ExpectRefused(ParseJsonBounded(ids + ",0]", limits), "JSON with more than 1048576 values");
}

TEST(JsonLimitsTest, StringsKeysAndContainersAreBoundedApart) {
  JsonLimits limits;
  limits.max_strings_and_containers = 3;
  EXPECT_TRUE(ParseJsonBounded(R"([1, "a", {}, 2, null, true])", limits).ok());  // numbers are not counted
  EXPECT_TRUE(ParseJsonBounded(R"({"a": 1, "b": 2})", limits).ok());             // the object and 2 keys
  ExpectRefused(ParseJsonBounded(R"({"a": 1, "b": 2, "c": 3})", limits),
                "JSON with more than 3 strings (keys included), arrays and objects");
  ExpectRefused(ParseJsonBounded(R"(["a", [], {}])", limits), "more than 3 strings");

  // The default: a million values, but not a million trees' worth of nodes.
  limits = JsonLimits();
  auto objects = [](int64_t n) {
    std::string s = "[{}";
    for (int64_t i = 1; i < n; ++i) s += ",{}";
    return s + "]";
  };
  EXPECT_TRUE(ParseJsonBounded(objects(limits.max_strings_and_containers - 1), limits).ok());
  ExpectRefused(ParseJsonBounded(objects(limits.max_strings_and_containers), limits),
                "JSON with more than 262144 strings (keys included), arrays and objects");
}

TEST(JsonLimitsTest, MalformedJsonIsRefused) {
  ExpectRefused(ParseJsonBounded(""), "not valid JSON");
  ExpectRefused(ParseJsonBounded("{not json"), "not valid JSON (or not UTF-8): parse error at byte ");
  ExpectRefused(ParseJsonBounded("[1, 2"), "not valid JSON");
  ExpectRefused(ParseJsonBounded("{} {}"), "not valid JSON");  // trailing content
  ExpectRefused(ParseJsonBounded("\"a\xC3\x28\""), "not UTF-8");
  // The message never quotes the body: a long bad string stays out of it.
  const std::string long_bad = "\"" + std::string(1 << 20, 'x') + "\xFF\"";
  absl::StatusOr<json> j = ParseJsonBounded(long_bad);
  ASSERT_FALSE(j.ok());
  EXPECT_LT(j.status().message().size(), 200u);
}

// The hostile body of issue 15: 8 MB of '[' (under the body limit) used to
// build 8 million nested arrays. It is refused at level 65, and only ever
// needed the SAX parser's stack.
TEST(JsonLimitsTest, EightMegabytesOfOpenBracketsAreRefused) {
  const std::string body(8 << 20, '[');
  ExpectRefused(ParseJsonBounded(body), "JSON nesting deeper than 64 levels");
  ExpectRefused(ParseJsonBounded(std::string(8 << 20, '{')), "not valid JSON");  // '{' needs a key
}

}  // namespace
}  // namespace beacon
