#include "model/rope_config.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

TEST(RopeConfigTest, ContextRule) {
  EXPECT_EQ(ScaledContextLength(4096, {}), 4096);
  EXPECT_EQ(ScaledContextLength(4096, {.type = RopeScalingType::kLinear, .factor = 4.0f}), 16384);
  // llama3: max_position_embeddings is already the extended context.
  EXPECT_EQ(ScaledContextLength(131072, {.type = RopeScalingType::kLlama3, .factor = 8.0f, .original_context = 8192}),
            131072);
  // yarn: the original context times the factor, whatever max_position_embeddings says.
  EXPECT_EQ(ScaledContextLength(40960, {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 32768}),
            131072);
  EXPECT_EQ(ScaledContextLength(1 << 30, {.type = RopeScalingType::kLinear, .factor = 64.0f}),
            std::numeric_limits<int32_t>::max());
}

TEST(RopeConfigTest, ValidationNamesTheField) {
  const auto message = [](const RopeScaling& s, const std::vector<float>& f = {}) {
    return std::string(ValidateRopeScaling(s, 8, f).message());
  };
  EXPECT_TRUE(ValidateRopeScaling({}, 8, {}).ok());
  // Fields a type does not use are not checked.
  EXPECT_TRUE(ValidateRopeScaling({.factor = -1.0f, .original_context = -5}, 8, {}).ok());
  EXPECT_TRUE(ValidateRopeScaling({.type = RopeScalingType::kLinear, .factor = 2.0f, .beta_fast = -1.0f}, 8, {}).ok());
  EXPECT_THAT(message({.type = RopeScalingType::kYarn, .factor = 4.0f}),
              HasSubstr("rope_scaling.original_max_position_embeddings (0) must be a positive integer"));
  EXPECT_THAT(
      message({.type = RopeScalingType::kLlama3, .factor = 8.0f, .low_freq_factor = 0.0f, .original_context = 64}),
      HasSubstr("rope_scaling.low_freq_factor (0)"));
  EXPECT_THAT(message({.type = static_cast<RopeScalingType>(9)}), HasSubstr("is not a RopeScalingType"));
  EXPECT_THAT(message({}, {1.0f, 2.0f}), HasSubstr("rope_freq_factors has 2 values, expected head_dim / 2 = 4"));
  EXPECT_THAT(message({}, {1.0f, 2.0f, -1.0f, 1.0f}), HasSubstr("rope_freq_factors[2] (-1)"));
  EXPECT_TRUE(ValidateRopeScaling({}, 8, {1.0f, 2.0f, 4.0f, 8.0f}).ok());
}

TEST(RopeConfigTest, NullOrAbsentIsNone) {
  auto s = ParseHfRopeScaling(nullptr, 512, "c.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, RopeScalingType::kNone);
  const nlohmann::json no_type = {{"factor", 4.0}};  // HF: no type means "default"
  s = ParseHfRopeScaling(&no_type, 512, "c.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, RopeScalingType::kNone);
  const nlohmann::json unknown = {{"rope_type", "longrope"}};
  EXPECT_FALSE(ParseHfRopeScaling(&unknown, 512, "c.json").ok());
  s = ParseHfRopeScaling(&unknown, 512, "c.json", /*unknown_as_none=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, RopeScalingType::kNone);
}

}  // namespace
}  // namespace beacon
