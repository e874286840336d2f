// ResolveGenerationConfig: OpenAI's defaults without a config, an HF
// directory's generation_config.json, a GGUF's general.sampling keys, an
// explicit path, the override, and errors that name the flag, file and key.
#include "engine/serving/generation_config.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/gguf/gguf_builder.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class GenerationConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("beacon-gencfg-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(GenerationConfigTest, WithoutAConfigTheDefaultsAreOpenAis) {
  for (const char* mode : {"auto", "none"}) {
    absl::StatusOr<DefaultSampling> d = ResolveGenerationConfig(mode, dir_.string(), "");
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->temperature, 1.0f);
    EXPECT_EQ(d->top_p, 1.0f);
    EXPECT_EQ(d->top_k, 0);
    EXPECT_EQ(d->source, "openai");
  }
}

TEST_F(GenerationConfigTest, AnHfDirectorysFileSetsTheDefaultsUnlessNone) {
  Write("generation_config.json",
        R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.05,
            "repetition_penalty": 1.1, "max_new_tokens": 4096, "eos_token_id": [1, 2]})");
  absl::StatusOr<DefaultSampling> d = ResolveGenerationConfig("auto", dir_.string(), "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FLOAT_EQ(d->temperature, 0.6f);
  EXPECT_FLOAT_EQ(d->top_p, 0.95f);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_FLOAT_EQ(d->min_p, 0.05f);
  EXPECT_FLOAT_EQ(d->repetition_penalty, 1.1f);
  EXPECT_EQ(d->source, "generation_config.json");
  EXPECT_EQ(ResolveGenerationConfig("none", dir_.string(), "")->temperature, 1.0f);
  // An explicit path: the file, or its directory; from any model.
  EXPECT_FLOAT_EQ(ResolveGenerationConfig((dir_ / "generation_config.json").string(), "m.gguf", "")->temperature, 0.6f);
  EXPECT_FLOAT_EQ(ResolveGenerationConfig(dir_.string(), "m.gguf", "")->temperature, 0.6f);
}

TEST_F(GenerationConfigTest, AGgufsSamplingKeysSetTheDefaults) {
  const std::string with = Write("with.gguf", test::GgufBuilder()
                                                  .Str("general.architecture", "llama")
                                                  .F32("general.sampling.temp", 0.7f)
                                                  .F32("general.sampling.top_p", 0.8f)
                                                  .I32("general.sampling.top_k", 40)
                                                  .Build());
  absl::StatusOr<DefaultSampling> d = ResolveGenerationConfig("auto", with, "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FLOAT_EQ(d->temperature, 0.7f);
  EXPECT_FLOAT_EQ(d->top_p, 0.8f);
  EXPECT_EQ(d->top_k, 40);
  EXPECT_EQ(d->source, "gguf");
  const std::string without = Write("without.gguf", test::GgufBuilder().Str("general.architecture", "llama").Build());
  EXPECT_EQ(ResolveGenerationConfig("auto", without, "")->source, "openai");
}

TEST_F(GenerationConfigTest, TheOverrideReplacesSingleValues) {
  Write("generation_config.json", R"({"temperature": 0.6, "top_p": 0.95})");
  absl::StatusOr<DefaultSampling> d = ResolveGenerationConfig("auto", dir_.string(), R"({"temperature": 0})");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->temperature, 0.0f);
  EXPECT_FLOAT_EQ(d->top_p, 0.95f);
  EXPECT_EQ(d->source, "generation_config.json+override");
}

TEST_F(GenerationConfigTest, ErrorsNameTheFlagFileAndKey) {
  absl::StatusOr<DefaultSampling> d = ResolveGenerationConfig((dir_ / "nope.json").string(), "m", "");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--generation-config: cannot read"));
  Write("generation_config.json", R"({"temperature": -1})");
  d = ResolveGenerationConfig("auto", dir_.string(), "");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("generation_config.json: temperature = -1 is outside"));
  Write("generation_config.json", "{not json");
  EXPECT_THAT(std::string(ResolveGenerationConfig("auto", dir_.string(), "").status().message()),
              HasSubstr("is not valid JSON"));
  d = ResolveGenerationConfig("none", "m", R"({"max_tokens": 5})");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--override-generation-config: 'max_tokens' is not one of"));
  d = ResolveGenerationConfig("none", "m", R"({"top_p": 0})");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("top_p = 0 is outside (0, 1]"));
}

}  // namespace
}  // namespace beacon
