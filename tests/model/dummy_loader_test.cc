#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hf_config.h"
#include "model/model_loader.h"
#include "tests/model/safetensors_writer.h"

namespace beacon {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Src(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }
std::string Tiny(const std::string& family) { return Src("tests/data/tiny-" + family + ".json"); }

// Every distinct tensor of a model, in a fixed order (output only if untied).
std::vector<const Tensor*> AllTensors(const ModelWeights& w) {
  std::vector<const Tensor*> out = {&w.tok_embd, &w.output_norm};
  if (!w.config.tie_embeddings) out.push_back(&w.output);
  for (const LayerWeights& L : w.layers) {
    for (const Tensor* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm,
                            &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down}) {
      if (!t->empty()) out.push_back(t);
    }
  }
  return out;
}

std::vector<const Tensor*> Matrices(const ModelWeights& w) {
  std::vector<const Tensor*> out;
  for (const Tensor* t : AllTensors(w)) {
    if (t->rows > 1) out.push_back(t);
  }
  return out;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

std::vector<float> Row(const Tensor& t, int64_t r) {
  std::vector<float> v(t.cols);
  DequantizeRow(t.dtype, t.row(r), v.data(), t.cols);
  return v;
}

class DummyLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_util::MakeTempDir("dummy_loader"); }
  void TearDown() override { fs::remove_all(dir_); }
  // The tiny config of `family` with `edits` merged in, written to a file.
  std::string Config(const std::string& family, const json& edits) {
    json j = *ReadJsonFile(Tiny(family));
    j.merge_patch(edits);
    const std::string path = dir_ + "/" + family + "-" + std::to_string(n_++) + ".json";
    testing_util::WriteText(path, j.dump());
    return path;
  }
  std::string dir_;
  int n_ = 0;
};

TEST_F(DummyLoaderTest, AllFamiliesLoadAtTheirShapes) {
  for (const std::string family : {"llama", "qwen2", "qwen3"}) {
    auto m = LoadDummyModel(Tiny(family), 1);
    ASSERT_TRUE(m.ok()) << family << ": " << m.status();
    const ModelWeights& w = (*m)->weights;
    const ModelConfig& c = w.config;
    EXPECT_FALSE((*m)->tokenizer.has_value());
    EXPECT_THAT((*m)->source, HasSubstr("dummy:"));
    EXPECT_EQ(w.layers.size(), 2u);
    EXPECT_EQ(w.tok_embd.rows, 256);
    EXPECT_EQ(w.tok_embd.cols, 64);
    EXPECT_EQ(w.output.data == w.tok_embd.data, c.tie_embeddings) << family;
    for (const LayerWeights& L : w.layers) {
      EXPECT_EQ(L.wq.rows, 64);
      EXPECT_EQ(L.wk.rows, 32);
      EXPECT_EQ(L.wo.cols, 64);
      EXPECT_EQ(L.w_gate.rows, 128);
      EXPECT_EQ(L.w_down.cols, 128);
      EXPECT_EQ(L.bq.empty(), family != "qwen2") << family;
      EXPECT_EQ(L.q_norm.empty(), family != "qwen3") << family;
      if (family == "qwen3") {
        EXPECT_EQ(L.k_norm.cols, 16);
      }
      for (int64_t i = 0; i < 64; ++i) {
        ASSERT_EQ(L.attn_norm.f32()[i], 1.0f);
        ASSERT_EQ(L.ffn_norm.f32()[i], 1.0f);
      }
      for (const Tensor* b : {&L.bq, &L.bk, &L.bv}) {
        for (int64_t i = 0; i < b->cols; ++i) ASSERT_LE(std::fabs(b->f32()[i]), 0.02f);
      }
    }
    for (const Tensor* t : Matrices(w)) EXPECT_EQ(t->dtype, DType::kBF16);  // the default
  }
}

TEST_F(DummyLoaderTest, SameSeedSameBytesDifferentSeedDifferentBytes) {
  auto a = LoadDummyModel(Tiny("qwen2"), 42);
  auto b = LoadDummyModel(Tiny("qwen2"), 42);
  auto c = LoadDummyModel(Tiny("qwen2"), 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto ta = AllTensors((*a)->weights), tb = AllTensors((*b)->weights), tc = AllTensors((*c)->weights);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_TRUE(SameBytes(*ta[i], *tb[i])) << "tensor " << i;
    const bool constant = ta[i]->rows == 1 && ta[i]->f32()[0] == 1.0f;  // norms are 1 whatever the seed
    if (!constant) {
      EXPECT_FALSE(SameBytes(*ta[i], *tc[i])) << "tensor " << i;
    }
  }
  // Distinct tensors of one model differ too (the name is part of the key).
  EXPECT_NE(std::memcmp((*a)->weights.layers[0].wq.data, (*a)->weights.layers[0].wk.data, 64), 0);
}

TEST_F(DummyLoaderTest, TensorValuesDependOnlyOnSeedAndName) {
  auto two = LoadDummyModel(Tiny("llama"), 7);
  auto three = LoadDummyModel(Config("llama", {{"num_hidden_layers", 3}}), 7);
  ASSERT_TRUE(two.ok() && three.ok());
  EXPECT_TRUE(SameBytes((*two)->weights.tok_embd, (*three)->weights.tok_embd));
  EXPECT_TRUE(SameBytes((*two)->weights.layers[1].w_down, (*three)->weights.layers[1].w_down));
}

TEST_F(DummyLoaderTest, MatricesHaveVarianceOneOverCols) {
  auto m = LoadDummyModel(Config("qwen3", {{"beacon_dummy_dtype", "f32"}}), 3);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const Tensor* t : Matrices((*m)->weights)) {
    ASSERT_EQ(t->dtype, DType::kF32);
    const int64_t n = t->rows * t->cols;
    double sum = 0, sq = 0, amax = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += t->f32()[i];
      sq += double(t->f32()[i]) * t->f32()[i];
      amax = std::max(amax, std::fabs(double(t->f32()[i])));
    }
    const double var = sq / n - (sum / n) * (sum / n);
    const double want = 1.0 / t->cols;
    EXPECT_NEAR(var / want, 1.0, 0.1) << t->rows << "x" << t->cols;
    EXPECT_NEAR(sum / n, 0.0, 5 * std::sqrt(want / n));
    EXPECT_LE(amax, std::sqrt(3.0 * want) * (1 + 1e-6));  // uniform: bounded by sqrt(3 var)
  }
}

// Quantised dummies are the F32 values of the same seed, quantised.
TEST_F(DummyLoaderTest, DtypeFromConfigKeyMatchesTheFloatValues) {
  auto ref = LoadDummyModel(Config("llama", {{"beacon_dummy_dtype", "f32"}}), 9);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const auto want = Matrices((*ref)->weights);
  struct Case {
    const char* name;
    DType dtype;
    double tol;  // of the max |x| = sqrt(3 / cols)
  } cases[] = {{"f16", DType::kF16, 1e-3},
               {"BF16", DType::kBF16, 8e-3},
               {"q8_0", DType::kQ8_0, 0.5 / 127 + 1e-3},
               {"q4_0", DType::kQ4_0, 0.5 / 7 + 1e-3},
               {"q4_1", DType::kQ4_1, 1.0 / 15 + 1e-3},
               {"q5_0", DType::kQ5_0, 1.0 / 15 + 1e-3},
               {"q5_1", DType::kQ5_1, 2.0 / 31 + 1e-3}};
  for (const auto& c : cases) {
    auto m = LoadDummyModel(Config("llama", {{"beacon_dummy_dtype", c.name}}), 9);
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.status();
    const auto got = Matrices((*m)->weights);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i]->dtype, c.dtype) << c.name;
      const double bound = c.tol * std::sqrt(3.0 / got[i]->cols);
      for (int64_t r = 0; r < got[i]->rows; r += 7) {
        const std::vector<float> g = Row(*got[i], r), f = Row(*want[i], r);
        for (int64_t k = 0; k < got[i]->cols; ++k) ASSERT_NEAR(g[k], f[k], bound) << c.name << " row " << r;
      }
    }
  }
}

// The config key chooses the matrices' dtype; the environment does not
// (a library reads none): BEACON_DUMMY_DTYPE, which once overrode it, is
// ignored.
TEST_F(DummyLoaderTest, ConfigKeyChoosesTheDtypeAndTheEnvironmentDoesNot) {
  setenv("BEACON_DUMMY_DTYPE", "f16", 1);
  auto m = LoadDummyModel(Config("qwen3", {{"beacon_dummy_dtype", "q8_0"}}), 1);
  unsetenv("BEACON_DUMMY_DTYPE");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->weights.layers[0].wq.dtype, DType::kQ8_0);
  EXPECT_EQ((*m)->weights.layers[0].q_norm.dtype, DType::kF32);  // vectors stay F32
}

TEST_F(DummyLoaderTest, BadDtypeKeyIsNamed) {
  auto m = LoadDummyModel(Config("llama", {{"beacon_dummy_dtype", "iq4_nl"}}), 1);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("'beacon_dummy_dtype'"));
  m = LoadDummyModel(Config("llama", {{"beacon_dummy_dtype", 8}}), 1);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("must be a string"));
}

TEST_F(DummyLoaderTest, QuantisedTypesNeedWholeBlocks) {
  // hidden 48 = 3 heads of 16: rows of 48 are not whole blocks of 32.
  const json narrow = {{"hidden_size", 48},
                       {"num_attention_heads", 3},
                       {"num_key_value_heads", 1},
                       {"head_dim", nullptr},
                       {"beacon_dummy_dtype", "q4_0"}};
  auto m = LoadDummyModel(Config("llama", narrow), 1);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("not a multiple of 32"));
}

TEST_F(DummyLoaderTest, KQuantsNeedWholeSuperBlocks) {
  // The tiny config's rows of 64 are a quarter of a K-quant super-block.
  auto m = LoadDummyModel(Config("llama", {{"beacon_dummy_dtype", "q4_k"}}), 1);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("not a multiple of 256 as Q4_K needs"));
}

TEST_F(DummyLoaderTest, UnsupportedFeaturesDoNotMatterForRandomWeights) {
  auto m = LoadDummyModel(
      Config("llama", {{"rope_scaling", {{"rope_type", "longrope"}, {"factor", 8.0}}}, {"use_sliding_window", true}}),
      1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->weights.config.rope_scaling.type, RopeScalingType::kNone);
}

// The RoPE scalings the forward pass implements are modelled for dummies
// too (tests/reference/test_rope_scaling_logits.py compares their logits),
// so an incomplete one is an error even here.
TEST_F(DummyLoaderTest, SupportedRopeScalingIsModelled) {
  auto m = LoadDummyModel(
      Config("qwen2",
             {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}}}}),
      1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->weights.config.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ((*m)->weights.config.context_length, 256);
  auto bad = LoadDummyModel(Config("llama", {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}}}), 1);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("rope_scaling.low_freq_factor"));
}

TEST_F(DummyLoaderTest, ConfigErrors) {
  EXPECT_EQ(LoadDummyModel(dir_ + "/absent.json", 1).status().code(), absl::StatusCode::kNotFound);
  auto m = LoadDummyModel(Config("qwen2", {{"vocab_size", nullptr}}), 1);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("'vocab_size' is missing"));
}

// A real published shape, end to end: SmolLM2-135M (~270 MB in BF16).
TEST_F(DummyLoaderTest, SmolLM2AtFullShape) {
  auto m = LoadDummyModel(Src("configs/smollm2-135m.json"), 5);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ(w.layers.size(), 30u);
  EXPECT_EQ(w.tok_embd.rows, 49152);
  EXPECT_EQ(w.layers[29].wk.rows, 192);
  EXPECT_EQ(w.layers[29].w_down.cols, 1536);
  size_t bytes = 0;
  for (const Tensor* t : AllTensors(w)) bytes += t->bytes();
  const size_t norm_params = 30 * 2 * 576 + 576;
  EXPECT_EQ(bytes, (134515008 - norm_params) * 2 + norm_params * 4);  // BF16 matrices, F32 norms
  // The embedding is filled on several threads; spot-check its last row.
  const std::vector<float> last = Row(w.tok_embd, 49151);
  double sq = 0;
  for (float v : last) sq += double(v) * v;
  EXPECT_NEAR(sq / last.size() * 576, 1.0, 0.2);
}

}  // namespace
}  // namespace beacon
