#include "model/hf_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace hf_config_test {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Src(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }

json TinyLlama() {
  return json::parse(R"({
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 256, "max_position_embeddings": 512, "rms_norm_eps": 1e-5})");
}

TEST(HfConfigTest, DefaultsForOptionalFields) {
  json j = TinyLlama();
  j.erase("num_key_value_heads");
  auto c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ModelFamily::kLlama);
  EXPECT_EQ(c->n_kv_heads, 4);  // = heads
  EXPECT_EQ(c->head_dim, 16);   // hidden / heads
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->tie_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_EQ(c->context_length, 512);
}

TEST(HfConfigTest, NullCountsAsAbsent) {
  json j = TinyLlama();
  j["head_dim"] = nullptr;
  j["rope_scaling"] = nullptr;
  j["num_key_value_heads"] = nullptr;
  auto c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->n_kv_heads, 4);
}

TEST(HfConfigTest, FamilyFeatures) {
  json j = TinyLlama();
  j["model_type"] = "qwen2";
  auto c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ModelFamily::kQwen2);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);

  j["model_type"] = "qwen3";
  j["head_dim"] = 32;  // Qwen3 sets head_dim independently of hidden / heads
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ModelFamily::kQwen3);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->q_dim(), 128);

  j = TinyLlama();
  j["attention_bias"] = true;
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qkv_bias);
}

TEST(HfConfigTest, ArchitecturesWhenModelTypeIsAbsent) {
  json j = TinyLlama();
  j.erase("model_type");
  j["architectures"] = {"Qwen3ForCausalLM"};
  auto c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ModelFamily::kQwen3);

  j["architectures"] = {"GPT2LMHeadModel"};
  c = ParseHfConfig(j);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("unsupported architecture 'GPT2LMHeadModel'"));

  j.erase("architectures");
  c = ParseHfConfig(j);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'model_type' is missing"));
}

TEST(HfConfigTest, UnknownModelTypeIsNamed) {
  json j = TinyLlama();
  j["model_type"] = "mistral";
  auto c = ParseHfConfig(j, "/models/m/config.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("unsupported model_type 'mistral'"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/models/m/config.json"));
}

TEST(HfConfigTest, MissingRequiredFieldIsNamedWithTheFile) {
  for (const char* field : {"num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                            "vocab_size", "max_position_embeddings", "rms_norm_eps"}) {
    json j = TinyLlama();
    j.erase(field);
    auto c = ParseHfConfig(j, "dir/config.json");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(std::string("'") + field + "' is missing")) << field;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("dir/config.json")) << field;
  }
}

TEST(HfConfigTest, WrongJsonTypesAreNamed) {
  struct Case {
    const char* field;
    json value;
    const char* message;
  } cases[] = {
      {"num_hidden_layers", "2", "'num_hidden_layers' must be an integer, got string"},
      {"hidden_size", 64.5, "'hidden_size' must be an integer, got number"},
      {"rope_theta", "big", "'rope_theta' must be a number, got string"},
      {"tie_word_embeddings", 1, "'tie_word_embeddings' must be a boolean"},
      {"model_type", 3, "'model_type' must be a string"},
      {"vocab_size", 1ll << 40, "'vocab_size': value 1099511627776 is out of range"},
      {"rope_scaling", "x", "'rope_scaling' must be an object or null"},
  };
  for (const auto& c : cases) {
    json j = TinyLlama();
    j[c.field] = c.value;
    auto r = ParseHfConfig(j);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.field;
  }
  auto r = ParseHfConfig(json::array());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("expected a JSON object"));
}

TEST(HfConfigTest, InconsistentShapesFailValidation) {
  json j = TinyLlama();
  j["num_key_value_heads"] = 3;  // 4 heads are not a multiple of 3
  EXPECT_EQ(ParseHfConfig(j).status().code(), absl::StatusCode::kInvalidArgument);
  j = TinyLlama();
  j["hidden_size"] = 66;  // no head_dim and 66 % 4 != 0
  auto c = ParseHfConfig(j);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("head_dim"));
}

TEST(HfConfigTest, UnsupportedFeaturesAreRefusedUnlessIgnored) {
  struct Case {
    const char* field;
    json value;
    const char* message;
  } cases[] = {
      {"rope_scaling",
       {{"rope_type", "longrope"}, {"factor", 8.0}},
       "field 'rope_scaling': RoPE scaling 'longrope' is not supported (supported: linear, llama3, yarn)"},
      {"rope_scaling", {{"type", "su"}}, "RoPE scaling 'su' is not supported"},
      {"use_sliding_window", true, "sliding-window"},
      {"hidden_act", "gelu", "activation 'gelu'"},
      {"mlp_bias", true, "MLP"},
  };
  for (const auto& c : cases) {
    json j = TinyLlama();
    j[c.field] = c.value;
    auto r = ParseHfConfig(j);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.field;
    EXPECT_TRUE(ParseHfConfig(j, "config.json", {.ignore_unsupported_features = true}).ok()) << c.field;
  }
  json j = TinyLlama();
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_TRUE(ParseHfConfig(j).ok());
}

TEST(HfConfigTest, FileErrorsAndNaming) {
  auto c = ParseHfConfigFile(Src("tests/data/does-not-exist.json"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  c = ParseHfConfigFile(Src("tests/data/tiny-qwen2.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "tiny-qwen2");  // named after the file without _name_or_path
}

TEST(HfConfigTest, ReadsEachRopeScaling) {
  json j = TinyLlama();  // max_position_embeddings 512
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  auto c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_context, 64);
  EXPECT_EQ(c->context_length, 512);  // llama3: max_position_embeddings is already the long one

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2}};  // the legacy key, an integer factor
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 2.0f);
  EXPECT_EQ(c->context_length, 1024);  // linear: max_position_embeddings * factor

  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c->rope_scaling.original_context, 64);
  EXPECT_EQ(c->rope_scaling.attention_factor, 0.0f);  // the default, resolved by the table
  EXPECT_EQ(c->rope_scaling.beta_fast, 32.0f);
  EXPECT_EQ(c->rope_scaling.beta_slow, 1.0f);
  EXPECT_TRUE(c->rope_scaling.truncate);
  EXPECT_EQ(c->context_length, 256);  // yarn: original * factor

  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0},  {"attention_factor", 1.5},
                       {"beta_fast", 16},     {"beta_slow", 2}, {"truncate", false}};
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.original_context, 512);  // absent: max_position_embeddings
  EXPECT_EQ(c->rope_scaling.attention_factor, 1.5f);
  EXPECT_EQ(c->rope_scaling.beta_fast, 16.0f);
  EXPECT_EQ(c->rope_scaling.beta_slow, 2.0f);
  EXPECT_FALSE(c->rope_scaling.truncate);
  EXPECT_EQ(c->context_length, 1024);

  // dynamic NTK equals plain RoPE up to max_position_embeddings, which stays the limit.
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(c->context_length, 512);
}

// transformers >= 4.56 writes "rope_parameters" with the theta inside.
TEST(HfConfigTest, ReadsRopeParameters) {
  json j = TinyLlama();
  j["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 128}};
  auto c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c->context_length, 512);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  c = ParseHfConfig(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_theta, 5e5f);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  j["rope_parameters"] = {{"rope_type", "longrope"}};
  EXPECT_THAT(std::string(ParseHfConfig(j).status().message()), HasSubstr("RoPE scaling 'longrope'"));
}

TEST(HfConfigTest, BadRopeScalingNamesTheField) {
  struct Case {
    json value;
    const char* message;
  } cases[] = {
      {"yarn", "field 'rope_scaling' must be an object or null, got string"},
      {{{"rope_type", 3}}, "'rope_scaling.rope_type' must be a string"},
      {{{"rope_type", "linear"}}, "'rope_scaling.factor' is required for RoPE scaling 'linear'"},
      {{{"rope_type", "linear"}, {"factor", "2"}}, "'rope_scaling.factor' must be a number, got string"},
      {{{"rope_type", "linear"}, {"factor", 0.5}}, "rope_scaling.factor (linear) (0.5) must be a finite number >= 1"},
      {{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}},
       "'rope_scaling.original_max_position_embeddings' is required for RoPE scaling 'llama3'"},
      {{{"rope_type", "llama3"},
        {"factor", 8.0},
        {"low_freq_factor", 4.0},
        {"high_freq_factor", 1.0},
        {"original_max_position_embeddings", 64}},
       "rope_scaling.high_freq_factor (1) must be finite and > low_freq_factor (4)"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 6.5}},
       "'rope_scaling.original_max_position_embeddings' must be a positive integer"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", -1.0}}, "rope_scaling.attention_factor (-1)"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 1.0}, {"beta_slow", 2.0}},
       "rope_scaling.beta_fast (1) must be finite and > beta_slow (2)"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", 1}}, "'rope_scaling.truncate' must be a boolean"},
      {{{"rope_type", "yarn"}, {"factor", 40.0}, {"mscale", 0.707}}, "'rope_scaling.mscale' (DeepSeek-V3"},
  };
  for (const auto& c : cases) {
    json j = TinyLlama();
    j["rope_scaling"] = c.value;
    auto r = ParseHfConfig(j, "tiny.json");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.value;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.value;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("tiny.json")) << c.value;
  }
}

// The shipped configs, at their published shapes.
TEST(HfConfigTest, ShippedConfigs) {
  auto q3 = ParseHfConfigFile(Src("configs/qwen3-4b.json"));
  ASSERT_TRUE(q3.ok()) << q3.status();
  EXPECT_EQ(q3->family, ModelFamily::kQwen3);
  EXPECT_EQ(q3->n_layers, 36);
  EXPECT_EQ(q3->hidden, 2560);
  EXPECT_EQ(q3->n_heads, 32);
  EXPECT_EQ(q3->n_kv_heads, 8);
  EXPECT_EQ(q3->head_dim, 128);
  EXPECT_EQ(q3->q_dim(), 4096);  // != hidden: Qwen3's explicit head_dim
  EXPECT_EQ(q3->ffn_hidden, 9728);
  EXPECT_EQ(q3->vocab_size, 151936);
  EXPECT_EQ(q3->context_length, 40960);
  EXPECT_EQ(q3->rope_theta, 1e6f);
  EXPECT_TRUE(q3->tie_embeddings);
  EXPECT_TRUE(q3->qk_norm);

  auto r1 = ParseHfConfigFile(Src("configs/deepseek-r1-distill-qwen-7b.json"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->family, ModelFamily::kQwen2);
  EXPECT_EQ(r1->head_dim, 128);
  EXPECT_EQ(r1->n_kv_heads, 4);
  EXPECT_EQ(r1->ffn_hidden, 18944);
  EXPECT_EQ(r1->vocab_size, 152064);
  EXPECT_FALSE(r1->tie_embeddings);
  EXPECT_TRUE(r1->qkv_bias);

  auto sm = ParseHfConfigFile(Src("configs/smollm2-135m.json"));
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_EQ(sm->n_layers, 30);
  EXPECT_EQ(sm->head_dim, 64);
  EXPECT_EQ(sm->n_kv_heads, 3);
  EXPECT_EQ(sm->rope_theta, 100000.0f);
  EXPECT_TRUE(sm->tie_embeddings);

  // Llama 3.1 and its DeepSeek-R1 distillation: llama3 scaling, 128K context.
  for (const char* file : {"configs/llama-3.1-8b.json", "configs/deepseek-r1-distill-llama-8b.json"}) {
    auto l3 = ParseHfConfigFile(Src(file));
    ASSERT_TRUE(l3.ok()) << l3.status();
    EXPECT_EQ(l3->family, ModelFamily::kLlama) << file;
    EXPECT_EQ(l3->n_layers, 32) << file;
    EXPECT_EQ(l3->hidden, 4096) << file;
    EXPECT_EQ(l3->n_heads, 32) << file;
    EXPECT_EQ(l3->n_kv_heads, 8) << file;
    EXPECT_EQ(l3->ffn_hidden, 14336) << file;
    EXPECT_EQ(l3->vocab_size, 128256) << file;
    EXPECT_EQ(l3->rope_theta, 500000.0f) << file;
    EXPECT_FLOAT_EQ(l3->rms_eps, 1e-5f) << file;
    EXPECT_FALSE(l3->tie_embeddings) << file;
    EXPECT_EQ(l3->rope_scaling.type, RopeScalingType::kLlama3) << file;
    EXPECT_EQ(l3->rope_scaling.factor, 8.0f) << file;
    EXPECT_EQ(l3->rope_scaling.low_freq_factor, 1.0f) << file;
    EXPECT_EQ(l3->rope_scaling.high_freq_factor, 4.0f) << file;
    EXPECT_EQ(l3->rope_scaling.original_context, 8192) << file;
    EXPECT_EQ(l3->context_length, 131072) << file;  // already the extended length
  }

  auto q8 = ParseHfConfigFile(Src("configs/qwen3-8b.json"));
  ASSERT_TRUE(q8.ok()) << q8.status();
  EXPECT_EQ(q8->family, ModelFamily::kQwen3);
  EXPECT_EQ(q8->n_layers, 36);
  EXPECT_EQ(q8->hidden, 4096);
  EXPECT_EQ(q8->head_dim, 128);
  EXPECT_EQ(q8->ffn_hidden, 12288);
  EXPECT_EQ(q8->vocab_size, 151936);
  EXPECT_EQ(q8->rope_theta, 1e6f);
  EXPECT_FALSE(q8->tie_embeddings);
  EXPECT_EQ(q8->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(q8->context_length, 40960);
  // Qwen's documented YaRN setting for 128K: factor 4 over 32768.
  auto q8y = ParseHfConfigFile(Src("configs/qwen3-8b-yarn.json"));
  ASSERT_TRUE(q8y.ok()) << q8y.status();
  EXPECT_EQ(q8y->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(q8y->rope_scaling.factor, 4.0f);
  EXPECT_EQ(q8y->rope_scaling.original_context, 32768);
  EXPECT_EQ(q8y->context_length, 131072);
  EXPECT_NEAR(q8y->RopeFrequencies().attention_factor, 1.1386294, 1e-6);
}

// Every config under configs/ (not the GPU profiles) parses as a real
// model's config and as a dummy's, so `dummy:configs/<name>.json` works.
TEST(HfConfigTest, EveryShippedConfigLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(Src("configs"))) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    ++n;
    auto real = ParseHfConfigFile(e.path().string());
    EXPECT_TRUE(real.ok()) << e.path() << ": " << real.status();
    auto dummy = ParseHfConfigFile(e.path().string(), {.ignore_unsupported_features = true});
    ASSERT_TRUE(dummy.ok()) << e.path() << ": " << dummy.status();
    EXPECT_TRUE(dummy->Validate().ok()) << e.path();
    EXPECT_EQ(dummy->rope_scaling.type, real->rope_scaling.type) << e.path();
    EXPECT_EQ(dummy->RopeFrequencies().inv_freq.size(), static_cast<size_t>(dummy->head_dim / 2)) << e.path();
  }
  EXPECT_GE(n, 7);
}

// Parameter counts from the configs match the published model sizes.
int64_t ParamCount(const ModelConfig& c) {
  const int64_t h = c.hidden, per_layer = 2 * h + h * c.q_dim() * 2 + h * c.kv_dim() * 2 + 3 * h * c.ffn_hidden +
                                          (c.qkv_bias ? c.q_dim() + 2 * c.kv_dim() : 0) +
                                          (c.qk_norm ? 2 * c.head_dim : 0);
  return c.n_layers * per_layer + h + int64_t{c.vocab_size} * h * (c.tie_embeddings ? 1 : 2);
}

TEST(HfConfigTest, ShippedConfigsHaveThePublishedParameterCounts) {
  const HfConfigOptions any{.ignore_unsupported_features = true};
  EXPECT_NEAR(ParamCount(*ParseHfConfigFile(Src("configs/qwen3-4b.json"), any)) / 1e9, 4.02, 0.01);
  EXPECT_NEAR(ParamCount(*ParseHfConfigFile(Src("configs/deepseek-r1-distill-qwen-7b.json"), any)) / 1e9, 7.62, 0.01);
  EXPECT_NEAR(ParamCount(*ParseHfConfigFile(Src("configs/llama-3.1-8b.json"), any)) / 1e9, 8.03, 0.01);
  EXPECT_NEAR(ParamCount(*ParseHfConfigFile(Src("configs/deepseek-r1-distill-llama-8b.json"), any)) / 1e9, 8.03, 0.01);
  EXPECT_NEAR(ParamCount(*ParseHfConfigFile(Src("configs/qwen3-8b.json"), any)) / 1e9, 8.19, 0.01);
  EXPECT_NEAR(ParamCount(*ParseHfConfigFile(Src("configs/smollm2-135m.json"), any)) / 1e6, 134.5, 0.5);
}

}  // namespace
}  // namespace hf_config_test
}  // namespace beacon
