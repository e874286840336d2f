// LoadHfModel against tiny checkpoints written by the test, one per family,
// plus every way a checkpoint directory can be broken.
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hf_config.h"
#include "model/model_loader.h"
#include "tests/model/safetensors_writer.h"

namespace beacon {
namespace hf_loader_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;
using testing_util::Decode;
using testing_util::MakeHfTensors;
using testing_util::TensorSpec;
using testing_util::WriteSafetensors;
using testing_util::WriteText;

std::string Src(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }

json TinyConfigJson(const std::string& family) { return *ReadJsonFile(Src("tests/data/tiny-" + family + ".json")); }

class HfLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_util::MakeTempDir("hf_loader"); }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes config.json and model.safetensors for `family` in `dtype`;
  // `edit` may change the tensors before they are written.
  void WriteCheckpoint(const std::string& family, const std::string& dtype,
                       const std::function<void(std::vector<TensorSpec>&)>& edit = nullptr, size_t misalign_by = 0) {
    const json cfg = TinyConfigJson(family);
    WriteText(dir_ + "/config.json", cfg.dump(2));
    auto c = ParseHfConfig(cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    specs_ = MakeHfTensors(*c, dtype);
    if (edit) edit(specs_);
    WriteSafetensors(dir_ + "/model.safetensors", specs_, misalign_by);
  }

  const TensorSpec& Spec(const std::string& name) const {
    for (const auto& s : specs_) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << "no spec " << name;
    return specs_.front();
  }

  // A matrix must be the file's bytes, untouched; a vector the exact F32 values.
  void ExpectMatrix(const Tensor& t, const std::string& name) const {
    const TensorSpec& s = Spec(name);
    ASSERT_FALSE(t.empty()) << name;
    EXPECT_EQ(t.rows, s.shape[0]) << name;
    EXPECT_EQ(t.cols, s.shape[1]) << name;
    EXPECT_EQ(DTypeName(t.dtype), s.dtype) << name;
    ASSERT_EQ(t.bytes(), s.bytes.size()) << name;
    EXPECT_EQ(std::memcmp(t.data, s.bytes.data(), s.bytes.size()), 0) << name;
  }
  void ExpectVector(const Tensor& t, const std::string& name) const {
    const std::vector<float> want = Decode(Spec(name));
    ASSERT_FALSE(t.empty()) << name;
    ASSERT_EQ(t.dtype, DType::kF32) << name;
    ASSERT_EQ(t.rows, 1) << name;
    ASSERT_EQ(t.cols, static_cast<int64_t>(want.size())) << name;
    EXPECT_EQ(std::vector<float>(t.f32(), t.f32() + t.cols), want) << name;
  }

  void ExpectAllTensors(const ModelWeights& w) const {
    const ModelConfig& c = w.config;
    ExpectMatrix(w.tok_embd, "model.embed_tokens.weight");
    ExpectVector(w.output_norm, "model.norm.weight");
    if (c.tie_embeddings) {
      EXPECT_EQ(w.output.data, w.tok_embd.data);
    } else {
      ExpectMatrix(w.output, "lm_head.weight");
    }
    ASSERT_EQ(w.layers.size(), static_cast<size_t>(c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerWeights& L = w.layers[l];
      const std::string p = "model.layers." + std::to_string(l) + ".";
      ExpectVector(L.attn_norm, p + "input_layernorm.weight");
      ExpectMatrix(L.wq, p + "self_attn.q_proj.weight");
      ExpectMatrix(L.wk, p + "self_attn.k_proj.weight");
      ExpectMatrix(L.wv, p + "self_attn.v_proj.weight");
      ExpectMatrix(L.wo, p + "self_attn.o_proj.weight");
      if (c.qkv_bias) {
        ExpectVector(L.bq, p + "self_attn.q_proj.bias");
        ExpectVector(L.bk, p + "self_attn.k_proj.bias");
        ExpectVector(L.bv, p + "self_attn.v_proj.bias");
      } else {
        EXPECT_TRUE(L.bq.empty() && L.bk.empty() && L.bv.empty());
      }
      if (c.qk_norm) {
        ExpectVector(L.q_norm, p + "self_attn.q_norm.weight");
        ExpectVector(L.k_norm, p + "self_attn.k_norm.weight");
      } else {
        EXPECT_TRUE(L.q_norm.empty() && L.k_norm.empty());
      }
      ExpectVector(L.ffn_norm, p + "post_attention_layernorm.weight");
      ExpectMatrix(L.w_gate, p + "mlp.gate_proj.weight");
      ExpectMatrix(L.w_up, p + "mlp.up_proj.weight");
      ExpectMatrix(L.w_down, p + "mlp.down_proj.weight");
    }
  }

  absl::Status LoadStatus() { return LoadHfModel(dir_).status(); }

  std::string dir_;
  std::vector<TensorSpec> specs_;
};

struct FamilyCase {
  std::string family;
  std::string dtype;
};

class HfLoaderFamilyTest : public HfLoaderTest, public ::testing::WithParamInterface<FamilyCase> {};

TEST_P(HfLoaderFamilyTest, LoadsConfigAndRoundTripsEveryTensor) {
  WriteCheckpoint(GetParam().family, GetParam().dtype);
  auto m = LoadHfModel(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->weights.config;
  EXPECT_EQ(ModelFamilyName(c.family), GetParam().family);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.ffn_hidden, 128);
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.rope_style, RopeStyle::kHalf);
  EXPECT_EQ(c.qkv_bias, GetParam().family == "qwen2");
  EXPECT_EQ(c.qk_norm, GetParam().family == "qwen3");
  EXPECT_EQ(c.tie_embeddings, GetParam().family != "qwen2");
  EXPECT_FALSE((*m)->tokenizer.has_value());
  EXPECT_EQ((*m)->source, dir_);
  ExpectAllTensors((*m)->weights);
}

INSTANTIATE_TEST_SUITE_P(Families, HfLoaderFamilyTest,
                         ::testing::Values(FamilyCase{"llama", "BF16"}, FamilyCase{"qwen2", "BF16"},
                                           FamilyCase{"qwen3", "BF16"}, FamilyCase{"llama", "F32"},
                                           FamilyCase{"qwen2", "F16"}, FamilyCase{"qwen3", "F32"}),
                         [](const auto& info) { return info.param.family + "_" + info.param.dtype; });

TEST_F(HfLoaderTest, MatricesAreZeroCopyFromTheMapping) {
  WriteCheckpoint("llama", "BF16");
  auto m = LoadHfModel(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  // Owned buffers: one per vector (2 per layer + final norm); the mapping is
  // the remaining entry. No matrix was copied.
  EXPECT_EQ((*m)->weights.keep_alive.size(), 1u + 1 + 2 * 2);
}

TEST_F(HfLoaderTest, MisalignedDataIsCopiedAligned) {
  WriteCheckpoint("qwen3", "F32", nullptr, /*misalign_by=*/2);
  auto m = LoadHfModel(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const Tensor* t : {&(*m)->weights.tok_embd, &(*m)->weights.layers[1].w_down}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 4, 0u);
  }
  ExpectAllTensors((*m)->weights);
}

TEST_F(HfLoaderTest, ShardedCheckpointLoads) {
  WriteCheckpoint("qwen2", "BF16");
  fs::remove(dir_ + "/model.safetensors");
  const size_t half = specs_.size() / 2;
  std::vector<TensorSpec> a(specs_.begin(), specs_.begin() + half), b(specs_.begin() + half, specs_.end());
  WriteSafetensors(dir_ + "/model-00001-of-00002.safetensors", a);
  WriteSafetensors(dir_ + "/model-00002-of-00002.safetensors", b);
  json map;
  for (const auto& s : a) map[s.name] = "model-00001-of-00002.safetensors";
  for (const auto& s : b) map[s.name] = "model-00002-of-00002.safetensors";
  WriteText(dir_ + "/model.safetensors.index.json", json({{"weight_map", map}}).dump());
  auto m = LoadHfModel(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectAllTensors((*m)->weights);
}

TEST_F(HfLoaderTest, LmHeadAbsentMeansTiedEvenIfConfigSaysOtherwise) {
  WriteCheckpoint("qwen2", "BF16", [](std::vector<TensorSpec>& s) {
    std::erase_if(s, [](const TensorSpec& t) { return t.name == "lm_head.weight"; });
  });
  auto m = LoadHfModel(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->weights.config.tie_embeddings);
  EXPECT_EQ((*m)->weights.output.data, (*m)->weights.tok_embd.data);
}

TEST_F(HfLoaderTest, MissingTensorIsNamed) {
  WriteCheckpoint("llama", "BF16", [](std::vector<TensorSpec>& s) {
    std::erase_if(s, [](const TensorSpec& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.layers.1.mlp.up_proj.weight"));
}

TEST_F(HfLoaderTest, MissingFamilyTensorsAreNamed) {
  WriteCheckpoint("qwen2", "BF16", [](std::vector<TensorSpec>& s) {
    std::erase_if(s, [](const TensorSpec& t) { return t.name == "model.layers.0.self_attn.k_proj.bias"; });
  });
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("model.layers.0.self_attn.k_proj.bias"));
  WriteCheckpoint("qwen3", "BF16", [](std::vector<TensorSpec>& s) {
    std::erase_if(s, [](const TensorSpec& t) { return t.name == "model.layers.1.self_attn.q_norm.weight"; });
  });
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("model.layers.1.self_attn.q_norm.weight"));
}

TEST_F(HfLoaderTest, WrongShapeIsNamedWithBothShapes) {
  WriteCheckpoint("llama", "BF16", [](std::vector<TensorSpec>& s) {
    for (auto& t : s) {
      if (t.name == "model.layers.1.self_attn.k_proj.weight") t.shape = {16, 128};  // same bytes
    }
  });
  absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor model.layers.1.self_attn.k_proj.weight has shape [16, 128], "
                                                  "expected [32, 64]"));
  WriteCheckpoint("llama", "BF16", [](std::vector<TensorSpec>& s) {
    for (auto& t : s) {
      if (t.name == "model.norm.weight") t.shape = {8, 8};
    }
  });
  EXPECT_THAT(std::string(LoadStatus().message()),
              HasSubstr("tensor model.norm.weight has shape [8, 8], expected [64]"));
}

TEST_F(HfLoaderTest, UnsupportedTensorDtypeIsNamed) {
  WriteCheckpoint("llama", "BF16", [](std::vector<TensorSpec>& s) {
    for (auto& t : s) {
      if (t.name == "model.layers.0.input_layernorm.weight") {
        t.dtype = "I64";
        t.bytes.resize(64 * 8);
      }
    }
  });
  absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor model.layers.0.input_layernorm.weight"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("dtype I64"));
}

TEST_F(HfLoaderTest, NonZeroOutputProjectionBiasIsRefused) {
  auto add_bias = [](float v) {
    return [v](std::vector<TensorSpec>& s) {
      s.push_back({"model.layers.0.self_attn.o_proj.bias",
                   "F32",
                   {64},
                   testing_util::Encode(std::vector<float>(64, v), "F32")});
    };
  };
  WriteCheckpoint("llama", "BF16", add_bias(0.0f));
  EXPECT_TRUE(LoadStatus().ok());  // an all-zero bias changes nothing
  WriteCheckpoint("llama", "BF16", add_bias(0.5f));
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("o_proj.bias"));
}

TEST_F(HfLoaderTest, ConfigErrorsNameTheFieldAndFile) {
  WriteCheckpoint("llama", "BF16");
  json cfg = TinyConfigJson("llama");
  cfg["model_type"] = "mistral";
  WriteText(dir_ + "/config.json", cfg.dump());
  absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'mistral'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("config.json"));

  cfg = TinyConfigJson("llama");
  cfg.erase("intermediate_size");
  WriteText(dir_ + "/config.json", cfg.dump());
  s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'intermediate_size' is missing"));

  WriteText(dir_ + "/config.json", "{ not json");
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("not valid JSON"));

  fs::remove(dir_ + "/config.json");
  EXPECT_EQ(LoadStatus().code(), absl::StatusCode::kNotFound);
}

// Llama 3.1's rope_scaling loads (tests/reference checks its logits); a type
// the forward pass does not implement is refused by name.
TEST_F(HfLoaderTest, RopeScalingLoadsOrIsRefusedByName) {
  WriteCheckpoint("llama", "BF16");
  json cfg = TinyConfigJson("llama");
  cfg["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 64}};
  WriteText(dir_ + "/config.json", cfg.dump());
  EXPECT_TRUE(LoadStatus().ok()) << LoadStatus();
  cfg["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 8.0}};
  WriteText(dir_ + "/config.json", cfg.dump());
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("RoPE scaling 'longrope' is not supported"));
}

TEST_F(HfLoaderTest, NoWeightsIsNotFound) {
  WriteText(dir_ + "/config.json", TinyConfigJson("qwen3").dump());
  absl::Status s = LoadStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.safetensors"));
}

// A byte-level BPE tokenizer beside the weights is loaded with the model, and
// generation_config.json's end tokens become extra EOS ids.
TEST_F(HfLoaderTest, LoadsTokenizerBesideTheWeights) {
  WriteCheckpoint("qwen3", "BF16");
  json vocab = json::object();
  for (int i = 0; i < 4; ++i) vocab[std::string(1, static_cast<char>('a' + i))] = i;
  vocab["ab"] = 4;
  const json tok = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
                    {"added_tokens",
                     {{{"id", 5}, {"content", "<|endoftext|>"}, {"special", true}},
                      {{"id", 6}, {"content", "<|im_end|>"}, {"special", true}}}},
                    {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  WriteText(dir_ + "/tokenizer.json", tok.dump());
  WriteText(dir_ + "/tokenizer_config.json", R"({"eos_token": "<|im_end|>", "bos_token": null})");
  WriteText(dir_ + "/generation_config.json", R"({"eos_token_id": [6, 5], "bos_token_id": 5})");
  auto m = LoadHfModel(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->tokenizer.has_value());
  const TokenizerData& t = *(*m)->tokenizer;
  EXPECT_EQ(t.tokens.size(), 7u);
  EXPECT_EQ(t.eos_id, 6);
  EXPECT_EQ(t.extra_eos_ids, std::vector<int32_t>{5});
  EXPECT_EQ(t.bos_id, 5);  // from generation_config.json, tokenizer_config has none
  EXPECT_FALSE(t.add_bos);

  // A generation_config.json that exists must parse: it holds stop tokens.
  WriteText(dir_ + "/generation_config.json", "{oops");
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("generation_config.json is not valid JSON"));
  fs::remove(dir_ + "/generation_config.json");

  // A tokenizer larger than the embedding table cannot be right.
  std::filesystem::remove(dir_ + "/tokenizer_config.json");
  vocab = json::object();
  for (int i = 0; i < 300; ++i) vocab["t" + std::to_string(i)] = i;
  WriteText(dir_ + "/tokenizer.json",
            json({{"model", {{"type", "BPE"}, {"vocab", vocab}}}, {"pre_tokenizer", {{"type", "ByteLevel"}}}}).dump());
  EXPECT_THAT(std::string(LoadStatus().message()), HasSubstr("300 tokens but the model's vocab_size is 256"));
}

}  // namespace
}  // namespace hf_loader_test
}  // namespace beacon
