// The GGUF loader on synthetic tiny models (one thing broken per error test)
// and LoadModel's dispatch to it. Files from other writers:
// gguf_model_files_test.cc.
#include "model/gguf_loader.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/tiny_gguf_model.h"

namespace beacon {
namespace {

using test::GgufBuilder;
using test::TinyModelBuilder;
using test::TinyModelSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GgufLoaderTest : public ::testing::Test {
 protected:
  // Writes the builder's file and loads it through the mmap path.
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const GgufBuilder& b) {
    const std::string path = ::testing::TempDir() + "/gguf_loader_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
    std::ofstream(path, std::ios::binary) << b.Build();
    paths_.push_back(path);
    return LoadGgufModel(path);
  }
  void TearDown() override {
    for (const auto& p : paths_) std::remove(p.c_str());
  }
  // The load fails with INVALID_ARGUMENT and a message containing `what`.
  void ExpectInvalid(const GgufBuilder& b, const std::string& what) {
    auto m = Load(b);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(what));
  }
  std::vector<std::string> paths_;
};

void ExpectVectorValues(const Tensor& t, int64_t n) {
  ASSERT_EQ(t.dtype, DType::kF32);
  ASSERT_EQ(t.rows, 1);
  ASSERT_EQ(t.cols, n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(t.f32()[i], test::TinyVectorValue(i)) << i;
}

TEST_F(GgufLoaderTest, LoadsTinyLlama) {
  auto m = Load(TinyModelBuilder({}));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.name, "Tiny llama");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.ffn_hidden, 96);
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.context_length, 256);
  EXPECT_EQ(c.rope_theta, 50000.0f);
  EXPECT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);

  EXPECT_EQ(w.tok_embd.dtype, DType::kQ8_0);
  EXPECT_EQ(w.tok_embd.rows, 40);
  EXPECT_EQ(w.tok_embd.cols, 64);
  EXPECT_EQ(w.output.data, w.tok_embd.data);
  ASSERT_EQ(w.layers.size(), 2u);
  const LayerWeights& l = w.layers[1];
  EXPECT_EQ(l.wk.rows, 32);
  EXPECT_EQ(l.wk.cols, 64);
  EXPECT_EQ(l.wo.rows, 64);
  EXPECT_EQ(l.wo.cols, 64);
  EXPECT_EQ(l.w_down.rows, 64);
  EXPECT_EQ(l.w_down.cols, 96);
  EXPECT_EQ(l.w_gate.dtype, DType::kQ8_0);
  EXPECT_TRUE(l.bq.empty());
  EXPECT_TRUE(l.q_norm.empty());
  ExpectVectorValues(l.attn_norm, 64);
  ExpectVectorValues(w.output_norm, 64);

  // Matrices (7 per layer) plus the tied output, counted once.
  const size_t q8_row = 64 / 32 * 34;
  const size_t per_layer = q8_row * (64 + 32 + 32 + 96 + 96) + (96 / 32 * 34) * 64 + q8_row * 64;
  EXPECT_EQ(w.StreamedWeightBytes(), 2 * per_layer + 40 * q8_row);
  // The same matrices' elements: a token's multiply-adds in them.
  EXPECT_EQ(w.StreamedWeightElements(), 2 * (64 * (64 + 32 + 32 + 64 + 96 + 96) + 96 * 64) + 40 * 64);

  ASSERT_TRUE((*m)->tokenizer.has_value());
  const TokenizerData& tok = *(*m)->tokenizer;
  EXPECT_EQ(tok.model, "gpt2");
  EXPECT_EQ(tok.pre, "smollm");
  ASSERT_EQ(tok.tokens.size(), 40u);
  EXPECT_EQ(tok.tokens[2], "<|im_end|>");
  EXPECT_EQ(tok.token_types[0], TokenType::kControl);
  EXPECT_EQ(tok.token_types[5], TokenType::kNormal);
  EXPECT_THAT(tok.merges, ElementsAre("a b", "c d"));
  EXPECT_EQ(tok.bos_id, 1);
  EXPECT_EQ(tok.eos_id, 2);
  EXPECT_EQ(tok.unk_id, 0);
  EXPECT_EQ(tok.pad_id, 2);
  EXPECT_FALSE(tok.add_bos);
  EXPECT_EQ(tok.chat_template, "{{ '<|im_start|>' }}");
  // <|endoftext|> ends generation too; <|im_end|> is already the EOS.
  EXPECT_THAT(tok.extra_eos_ids, ElementsAre(0));
}

TEST_F(GgufLoaderTest, UntiedOutputIsItsOwnMatrix) {
  TinyModelSpec s;
  s.tied = false;
  s.matrix_type = 1;  // F16
  auto m = Load(TinyModelBuilder(s));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  EXPECT_FALSE(w.config.tie_embeddings);
  EXPECT_NE(w.output.data, w.tok_embd.data);
  EXPECT_EQ(w.output.dtype, DType::kF16);
  EXPECT_EQ(w.output.rows, 40);
  EXPECT_EQ(w.tok_embd.dtype, DType::kQ8_0);
  EXPECT_EQ(w.StreamedWeightBytes() - 40 * 64 * 2, 2u * 2 * (64 * 64 + 32 * 64 * 2 + 64 * 64 + 96 * 64 * 3));
}

TEST_F(GgufLoaderTest, F16AndBF16VectorsBecomeF32) {
  for (uint32_t type : {1u, 30u}) {
    TinyModelSpec s;
    s.vector_type = type;
    s.arch = "qwen2";
    auto m = Load(TinyModelBuilder(s));
    ASSERT_TRUE(m.ok()) << m.status();
    const ModelWeights& w = (*m)->weights;
    ExpectVectorValues(w.output_norm, 64);
    ExpectVectorValues(w.layers[0].ffn_norm, 64);
    ExpectVectorValues(w.layers[1].bk, 32);
  }
}

TEST_F(GgufLoaderTest, LoadsQwen2WithBiases) {
  TinyModelSpec s;
  s.arch = "qwen2";
  auto m = Load(TinyModelBuilder(s));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ(w.config.family, ModelFamily::kQwen2);
  EXPECT_EQ(w.config.rope_style, RopeStyle::kHalf);
  EXPECT_TRUE(w.config.qkv_bias);
  ExpectVectorValues(w.layers[0].bq, 64);
  ExpectVectorValues(w.layers[0].bv, 32);
  EXPECT_TRUE(w.layers[0].q_norm.empty());
}

TEST_F(GgufLoaderTest, Qwen2WithoutABiasFails) {
  TinyModelSpec s;
  s.arch = "qwen2";
  ExpectInvalid(TinyModelBuilder(s).RemoveTensor("blk.1.attn_v.bias"), "missing tensor blk.1.attn_v.bias");
}

TEST_F(GgufLoaderTest, LoadsQwen3WithQkNormAndWideHeads) {
  TinyModelSpec s;
  s.arch = "qwen3";
  s.head_dim = 32;  // q_dim 128 != hidden 64, as in Qwen3-4B
  auto m = Load(TinyModelBuilder(s));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ(w.config.family, ModelFamily::kQwen3);
  EXPECT_EQ(w.config.head_dim, 32);
  EXPECT_TRUE(w.config.qk_norm);
  EXPECT_FALSE(w.config.qkv_bias);
  EXPECT_EQ(w.layers[0].wq.rows, 128);
  EXPECT_EQ(w.layers[0].wo.cols, 128);
  ExpectVectorValues(w.layers[1].q_norm, 32);
  ExpectVectorValues(w.layers[1].k_norm, 32);
  EXPECT_TRUE(w.layers[0].bq.empty());
}

TEST_F(GgufLoaderTest, MissingTensor) {
  ExpectInvalid(TinyModelBuilder({}).RemoveTensor("blk.1.ffn_up.weight"), "missing tensor blk.1.ffn_up.weight");
}

TEST_F(GgufLoaderTest, WrongShapedTensor) {
  ExpectInvalid(TinyModelBuilder({}).Tensor("blk.1.attn_k.weight", {64, 16}, 8),
                "tensor blk.1.attn_k.weight has shape [64, 16], expected [64, 32]");
}

TEST_F(GgufLoaderTest, WrongShapedVector) {
  ExpectInvalid(TinyModelBuilder({}).Tensor("output_norm.weight", {32, 2}, 0),
                "tensor output_norm.weight has shape [32, 2], expected [64]");
}

TEST_F(GgufLoaderTest, UnsupportedTensorType) {
  // IQ4_NL: what llama.cpp's Q2_K/Q3_K quantisations fall back to for rows
  // that are not a multiple of 256; named, not a crash.
  ExpectInvalid(TinyModelBuilder({}).Tensor("blk.0.attn_q.weight", {64, 64}, 20),
                "tensor blk.0.attn_q.weight has unsupported type IQ4_NL (20)");
}

TEST_F(GgufLoaderTest, KQuantRowsMustBeWholeSuperBlocks) {
  // A K-quant row of 64 elements is a quarter of a super-block.
  ExpectInvalid(TinyModelBuilder({}).Tensor("blk.0.attn_q.weight", {64, 64}, 12),
                "row length 64 is not a multiple of the block size 256");
}

TEST_F(GgufLoaderTest, UnsupportedArchitecture) {
  ExpectInvalid(TinyModelBuilder({}).Str("general.architecture", "phi3"),
                "unsupported architecture 'phi3' (supported: llama, qwen2, qwen3)");
}

TEST_F(GgufLoaderTest, HeadsNotDivisibleByKvHeads) {
  ExpectInvalid(TinyModelBuilder({}).U32("llama.attention.head_count_kv", 3),
                "n_heads (4) must be a multiple of n_kv_heads (3)");
}

TEST_F(GgufLoaderTest, MissingRequiredKey) {
  ExpectInvalid(TinyModelBuilder({}).Remove("llama.block_count"), "missing metadata 'llama.block_count'");
}

TEST_F(GgufLoaderTest, WrongKeyType) {
  ExpectInvalid(TinyModelBuilder({}).Str("llama.embedding_length", "64"),
                "metadata 'llama.embedding_length' has type STRING");
}

TEST_F(GgufLoaderTest, RejectsWhatTheForwardPassCannotCompute) {
  ExpectInvalid(TinyModelBuilder({}).U32("llama.rope.dimension_count", 8), "partial rotary embedding");
  ExpectInvalid(TinyModelBuilder({}).Str("llama.rope.scaling.type", "longrope"),
                "RoPE scaling 'longrope' is not supported (supported: none, linear, yarn");
  ExpectInvalid(TinyModelBuilder({}).Str("llama.rope.scaling.type", "yarn"), "without llama.rope.scaling.factor");
  // head_dim 16: rope_freqs.weight must hold 8 F32 factors.
  ExpectInvalid(TinyModelBuilder({}).Tensor("rope_freqs.weight", {4}, 0), "rope_freqs.weight must be F32 [8]");
  ExpectInvalid(TinyModelBuilder({}).Tensor("rope_freqs.weight", {8}, 1), "rope_freqs.weight must be F32 [8]");
  ExpectInvalid(TinyModelBuilder({}).Tensor("rope_freqs.weight", {8}, 0, test::F32Data(std::vector<float>(8, 0.0f))),
                "rope_freq_factors[0] (0) must be a finite number > 0");
  ExpectInvalid(TinyModelBuilder({}).Str("llama.rope.scaling.type", "linear").F32("llama.rope.scaling.factor", 0.5f),
                "rope_scaling.factor (linear) (0.5) must be a finite number >= 1");
  GgufBuilder yarn = TinyModelBuilder({}).Str("llama.rope.scaling.type", "yarn").F32("llama.rope.scaling.factor", 4);
  ExpectInvalid(GgufBuilder(yarn).F32("llama.rope.scaling.yarn_ext_factor", 0.5f), "yarn_ext_factor");
  ExpectInvalid(GgufBuilder(yarn).F32("llama.rope.scaling.yarn_log_multiplier", 0.1f), "yarn_log_multiplier");
  ExpectInvalid(GgufBuilder(yarn).F32("llama.rope.scaling.yarn_beta_fast", 0.5f), "rope_scaling.beta_fast");
}

// Llama 3.1 as llama.cpp's converter writes it: no scaling type, the llama3
// factors folded into rope_freqs.weight. The context is the file's.
TEST_F(GgufLoaderTest, ReadsRopeFrequencyFactors) {
  const std::vector<float> factors = {1, 1, 1, 1.5f, 2, 4, 8, 8};
  auto m = Load(TinyModelBuilder({}).Tensor("rope_freqs.weight", {8}, 0, test::F32Data(factors)));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->weights.config;
  EXPECT_EQ(c.rope_freq_factors, factors);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(c.context_length, 256);
  const RopeTable t = c.RopeFrequencies();
  ASSERT_EQ(t.inv_freq.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(t.inv_freq[i], static_cast<float>(std::pow(50000.0, -2.0 * i / 16) / factors[i])) << i;
  }
  EXPECT_EQ(t.attention_factor, 1.0f);
}

TEST_F(GgufLoaderTest, ReadsYarnMetadata) {
  TinyModelSpec s;
  s.arch = "qwen3";
  auto m = Load(TinyModelBuilder(s)
                    .Str("qwen3.rope.scaling.type", "yarn")
                    .F32("qwen3.rope.scaling.factor", 4.0f)
                    .U32("qwen3.rope.scaling.original_context_length", 64)
                    .F32("qwen3.rope.scaling.yarn_attn_factor", 1.25f)
                    .F32("qwen3.rope.scaling.yarn_beta_fast", 16.0f)
                    .F32("qwen3.rope.scaling.yarn_beta_slow", 2.0f));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->weights.config;
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c.rope_scaling.factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_context, 64);
  EXPECT_EQ(c.rope_scaling.attention_factor, 1.25f);
  EXPECT_EQ(c.rope_scaling.beta_fast, 16.0f);
  EXPECT_EQ(c.rope_scaling.beta_slow, 2.0f);
  EXPECT_TRUE(c.rope_freq_factors.empty());
  EXPECT_EQ(c.context_length, 64 * 4);  // original context * factor (the file says 256 too)
  EXPECT_EQ(c.RopeFrequencies().attention_factor, 1.25f);

  // Defaults: original context = context_length, attention factor 0.1 ln(factor) + 1.
  auto d = Load(TinyModelBuilder(s).Str("qwen3.rope.scaling.type", "yarn").F32("qwen3.rope.scaling.factor", 2.0f));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->get()->weights.config.rope_scaling.original_context, 256);
  EXPECT_EQ(d->get()->weights.config.context_length, 512);
  EXPECT_NEAR(d->get()->weights.config.RopeFrequencies().attention_factor, 1.0693147, 1e-6);
}

TEST_F(GgufLoaderTest, ReadsLinearScaling) {
  auto m = Load(TinyModelBuilder({}).Str("llama.rope.scaling.type", "linear").F32("llama.rope.scaling.factor", 2.0f));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->weights.config;
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c.context_length, 512);  // context_length * factor
  EXPECT_FLOAT_EQ(c.RopeFrequencies().inv_freq[1], static_cast<float>(std::pow(50000.0, -2.0 / 16) / 2));
  // "none" is no scaling.
  auto n = Load(TinyModelBuilder({}).Str("llama.rope.scaling.type", "none"));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->get()->weights.config.rope_scaling.type, RopeScalingType::kNone);
}

TEST_F(GgufLoaderTest, HeadCountThatDoesNotDivideHiddenNeedsKeyLength) {
  ExpectInvalid(TinyModelBuilder({}).U32("llama.attention.head_count", 5).U32("llama.attention.head_count_kv", 5),
                "is not a multiple of head_count (5)");
}

TEST_F(GgufLoaderTest, VocabularyFallsBackToTheEmbedding) {
  TinyModelSpec s;
  s.tokenizer = false;
  auto m = Load(TinyModelBuilder(s).Remove("llama.vocab_size"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->weights.config.vocab_size, 40);
  EXPECT_FALSE((*m)->tokenizer.has_value());
}

TEST_F(GgufLoaderTest, TokenizerLargerThanTheVocabulary) {
  ExpectInvalid(
      TinyModelBuilder({}).StrArray("tokenizer.ggml.tokens", test::TinyTokens(41)).Remove("tokenizer.ggml.token_type"),
      "the tokenizer has 41 tokens but the model's vocabulary is 40");
}

TEST_F(GgufLoaderTest, TokenizerErrors) {
  ExpectInvalid(TinyModelBuilder({}).I32Array("tokenizer.ggml.token_type", {1, 1}),
                "'tokenizer.ggml.token_type' has 2 entries for 40 tokens");
  ExpectInvalid(TinyModelBuilder({}).U32("tokenizer.ggml.eos_token_id", 40),
                "'tokenizer.ggml.eos_token_id' = 40 is outside the vocabulary of 40 tokens");
  std::vector<int32_t> types(40, 1);
  types[7] = 9;
  ExpectInvalid(TinyModelBuilder({}).I32Array("tokenizer.ggml.token_type", types),
                "'tokenizer.ggml.token_type'[7] = 9");
  ExpectInvalid(TinyModelBuilder({}).Remove("tokenizer.ggml.model"), "'tokenizer.ggml.model' is absent");
}

TEST_F(GgufLoaderTest, OutOfRangePaddingIdIsDropped) {
  auto m = Load(TinyModelBuilder({}).I64("tokenizer.ggml.padding_token_id", -1));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->tokenizer->pad_id, -1);
}

TEST_F(GgufLoaderTest, UnalignedBufferIsCopiedToAlignedMemory) {
  // alignment 8 and a buffer starting one byte into an allocation: no tensor
  // is 32-byte aligned where it lies.
  const std::string file = TinyModelBuilder({}).Alignment(8).Build();
  std::string storage = "x" + file;
  std::string_view bytes(storage.data() + 1, file.size());
  auto gguf = GgufFile::FromBuffer(bytes, "unaligned");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto embd = (*gguf)->FindTensor("token_embd.weight");
  ASSERT_TRUE(embd.ok());
  auto m = LoadGgufModelFromFile(std::move(*gguf));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.tok_embd.data) % 32, 0u);
  EXPECT_EQ(std::memcmp(w.tok_embd.data, embd->data, embd->nbytes), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.layers[1].w_down.data) % 32, 0u);
  ExpectVectorValues(w.layers[1].attn_norm, 64);
}

TEST_F(GgufLoaderTest, ReadGgufTokenizerIsNotFoundWithoutTokens) {
  TinyModelSpec s;
  s.tokenizer = false;
  const std::string bytes = TinyModelBuilder(s).Build();
  auto f = GgufFile::FromBuffer(bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ReadGgufTokenizer(**f).status().code(), absl::StatusCode::kNotFound);
}

// LoadModel's dispatch, for the GGUF side: by extension, by magic, and the
// errors for paths that are not models.
TEST_F(GgufLoaderTest, LoadModelRecognisesGgufByExtensionAndByMagic) {
  const std::string bytes = TinyModelBuilder({}).Build();
  for (const std::string name : {"by_ext.GGUF", "by_magic.bin"}) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    paths_.push_back(path);
    auto m = LoadModel(path);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*m)->source, path);
    EXPECT_EQ((*m)->weights.config.n_layers, 2);
  }
}

TEST_F(GgufLoaderTest, LoadModelErrors) {
  auto missing = LoadModel("/nonexistent/model.gguf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/model.gguf"));

  const std::string text = ::testing::TempDir() + "/notes.txt";
  std::ofstream(text) << "not a model";
  paths_.push_back(text);
  auto other = LoadModel(text);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("neither a GGUF file"));

  // A .gguf that is not one fails in the GGUF parser, naming the file.
  const std::string fake = ::testing::TempDir() + "/fake.gguf";
  std::ofstream(fake) << "not a model";
  paths_.push_back(fake);
  auto bad = LoadModel(fake);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("fake.gguf: bad magic"));

  EXPECT_EQ(LoadModel("dummy:").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(LoadModel("dummy:/nonexistent/config.json@7").ok());
}

}  // namespace
}  // namespace beacon
