// The GGUF loader on model files it did not write itself: the seed models
// gguf-py wrote (tests/fuzz/make_corpus.py) and the real default model.
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf_loader.h"

namespace beacon {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Models written by gguf-py (tests/fuzz/make_corpus.py): an independent
// writer's layout, quantisation and metadata encodings.
TEST(GgufLoaderCorpusTest, LoadsModelsWrittenByGgufPy) {
  const std::string dir = std::string(BEACON_SOURCE_DIR) + "/tests/fuzz/corpus/";
  struct Case {
    const char* file;
    ModelFamily family;
    DType matrix;
    int head_dim;
    bool tied;
  };
  for (const Case& c : {Case{"tiny_llama.gguf", ModelFamily::kLlama, DType::kQ8_0, 16, true},
                        Case{"tiny_llama_f16.gguf", ModelFamily::kLlama, DType::kF16, 16, true},
                        Case{"tiny_qwen2.gguf", ModelFamily::kQwen2, DType::kQ4_1, 16, false},
                        Case{"tiny_qwen3.gguf", ModelFamily::kQwen3, DType::kQ4_0, 32, true}}) {
    SCOPED_TRACE(c.file);
    auto m = LoadGgufModel(dir + c.file);
    ASSERT_TRUE(m.ok()) << m.status();
    const ModelWeights& w = (*m)->weights;
    EXPECT_EQ(w.config.family, c.family);
    EXPECT_EQ(w.config.hidden, 32);
    EXPECT_EQ(w.config.head_dim, c.head_dim);
    EXPECT_EQ(w.config.vocab_size, 40);
    EXPECT_EQ(w.config.tie_embeddings, c.tied);
    EXPECT_EQ(w.layers[0].wq.dtype, c.matrix);
    EXPECT_EQ(w.layers[0].wq.rows, 2 * c.head_dim);
    EXPECT_EQ(w.tok_embd.dtype, DType::kQ8_0);
    EXPECT_EQ(w.layers[0].attn_norm.dtype, DType::kF32);
    // Norms were written as 1 + 0.1 N(0, 1) in F32, F16 or BF16.
    for (int i = 0; i < 32; ++i) {
      EXPECT_NEAR(w.layers[0].ffn_norm.f32()[i], 1.0f, 0.6f);
    }
    ASSERT_TRUE((*m)->tokenizer.has_value());
    EXPECT_EQ((*m)->tokenizer->tokens.size(), 40u);
    EXPECT_THAT((*m)->tokenizer->merges, ElementsAre("a b", "c d", "ab c"));
  }
}

// The default model, SmolLM2-135M-Instruct Q4_1 (docs/design.md, "Models").
TEST(GgufLoaderRealModelTest, LoadsTheDefaultModel) {
  if (!std::ifstream(BEACON_MODEL_PATH).good()) GTEST_SKIP() << BEACON_MODEL_PATH << " is absent";
  auto m = LoadGgufModel(BEACON_MODEL_PATH);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelWeights& w = (*m)->weights;
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.hidden, 576);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn_hidden, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.context_length, 8192);
  EXPECT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(w.output.data, w.tok_embd.data);
  EXPECT_EQ(w.tok_embd.dtype, DType::kQ8_0);
  ASSERT_EQ(w.layers.size(), 30u);
  for (const LayerWeights& l : w.layers) {
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      EXPECT_EQ(t->dtype, DType::kQ4_1);
    }
    EXPECT_EQ(l.attn_norm.dtype, DType::kF32);
  }
  EXPECT_EQ(w.layers[29].wk.rows, 192);
  EXPECT_EQ(w.layers[29].wk.cols, 576);
  // 30 layers of Q4_1 matrices plus the Q8_0 embedding as output (gguf-py's
  // byte counts for the same tensors).
  EXPECT_EQ(w.StreamedWeightBytes(), 96436224u);

  ASSERT_TRUE((*m)->tokenizer.has_value());
  const TokenizerData& tok = *(*m)->tokenizer;
  EXPECT_EQ(tok.model, "gpt2");
  EXPECT_EQ(tok.pre, "smollm");
  EXPECT_EQ(tok.tokens.size(), 49152u);
  EXPECT_EQ(tok.token_types.size(), 49152u);
  EXPECT_EQ(tok.merges.size(), 48900u);
  EXPECT_EQ(tok.bos_id, 1);
  EXPECT_EQ(tok.eos_id, 2);
  EXPECT_EQ(tok.tokens[2], "<|im_end|>");
  EXPECT_THAT(tok.extra_eos_ids, Contains(0));
  EXPECT_THAT(tok.extra_eos_ids, Not(Contains(2)));
  EXPECT_FALSE(tok.add_bos);
  EXPECT_THAT(tok.chat_template, HasSubstr("<|im_start|>"));
}

}  // namespace
}  // namespace beacon
