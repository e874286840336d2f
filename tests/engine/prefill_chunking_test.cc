// The CPU forward pass gives a prompt's tokens bit-identical logits however
// the prompt is chunked: all at once, in chunks that cross the prefill
// kernel's 16-token query tiles and 16-key tiles, one token at a time (decode
// entries), beside other sequences in the batch, and in caches of different
// block sizes. Quantised dummy weights, whose integer matmuls are
// batch-invariant, so any difference would come from attention (the tiled
// prefill kernel against the decode kernel, prefill_attention.h).
#include <bit>
#include <cstdio>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/model_loader.h"

namespace beacon {
namespace {

struct Shape {
  const char* name;
  int hidden, heads, kv_heads;  // head_dim = hidden / heads
};

void PrintTo(const Shape& s, std::ostream* os) { *os << s.name; }

std::unique_ptr<LoadedModel> QuantisedDummy(const Shape& s) {
  const std::string path = ::testing::TempDir() + "/prefill_chunking_" + s.name + ".json";
  std::ofstream(path) << "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
                      << "\"hidden_act\": \"silu\", \"hidden_size\": " << s.hidden
                      << ", \"intermediate_size\": " << 2 * s.hidden << ", \"max_position_embeddings\": 512, "
                      << "\"num_attention_heads\": " << s.heads << ", \"num_hidden_layers\": 2, "
                      << "\"num_key_value_heads\": " << s.kv_heads << ", \"rms_norm_eps\": 1e-06, "
                      << "\"rope_theta\": 10000.0, \"tie_word_embeddings\": true, \"vocab_size\": 256, "
                      << "\"beacon_dummy_dtype\": \"q4_1\"}";
  auto m = LoadDummyModel(path, 7);
  EXPECT_TRUE(m.ok()) << m.status();
  std::remove(path.c_str());
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> Tokens(int n, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 53 + salt * 17 + 5) % 256;
  return t;
}

bool SameBits(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

class PrefillChunkingTest : public ::testing::TestWithParam<Shape> {};

// Logits of every prompt position, the prompt fed in `chunks` (sizes, cycled
// until the prompt is consumed; 0 = the rest at once), each step beside a
// companion sequence that is decoding when `companion` is set.
std::vector<float> RunPrompt(CpuBackend* backend, const ModelConfig& c, const std::vector<int32_t>& prompt,
                             const std::vector<int>& chunks, int block_size, bool companion, DType kv_dtype) {
  KvCacheShape shape{c.n_layers, c.n_kv_heads, c.head_dim, block_size};
  shape.dtype = kv_dtype;
  KvCache cache(shape, 512 / block_size + 8);
  SequenceKv seq(&cache), other(&cache);
  const std::vector<int32_t> other_prompt = Tokens(9, 3);
  std::vector<float> logits, all;
  if (companion) {
    ForwardEntry e{&other, other_prompt, 0, false};
    EXPECT_TRUE(backend->Forward(std::span(&e, 1), &logits).ok());
  }
  int32_t done = 0, other_pos = static_cast<int32_t>(other_prompt.size());
  const int32_t n = static_cast<int32_t>(prompt.size());
  for (size_t k = 0; done < n; ++k) {
    const int size = chunks[k % chunks.size()];
    const int32_t len = size == 0 ? n - done : std::min(size, n - done);
    std::vector<ForwardEntry> batch;
    const int32_t other_token = other_pos % 256;
    if (companion) batch.push_back({&other, std::span<const int32_t>(&other_token, 1), other_pos, false});
    batch.push_back({&seq, std::span<const int32_t>(prompt).subspan(done, len), done, true});
    EXPECT_TRUE(backend->Forward(batch, &logits).ok());
    const size_t skip = companion ? c.vocab_size : 0;  // the companion's row comes first
    all.insert(all.end(), logits.begin() + skip, logits.end());
    done += len;
    ++other_pos;
  }
  return all;
}

TEST_P(PrefillChunkingTest, LogitsDoNotDependOnChunking) {
  auto model = QuantisedDummy(GetParam());
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->weights.config;
  ThreadPool pool(2);
  CpuBackend backend(&model->weights, &pool);
  const std::vector<int32_t> prompt = Tokens(70, 1);
  for (DType kv_dtype : {DType::kF32, DType::kBF16}) {  // both host KV types
    const char* type = kv_dtype == DType::kF32 ? "f32 KV: " : "bf16 KV: ";
    const std::vector<float> whole = RunPrompt(&backend, c, prompt, {0}, 16, false, kv_dtype);
    ASSERT_EQ(whole.size(), prompt.size() * c.vocab_size);
    struct Run {
      const char* what;
      std::vector<int> chunks;
      int block_size;
      bool companion;
    };
    const Run runs[] = {
        {"chunks 1,16,17,5,30", {1, 16, 17, 5, 30}, 16, false},
        {"chunks of 7 beside a decoding sequence", {7}, 16, true},
        {"one token at a time (decode entries)", {1}, 16, false},
        {"chunks of 23, blocks of 5", {23}, 5, false},
        {"one token at a time, blocks of 8, beside a decoding sequence", {1}, 8, true},
    };
    for (const Run& r : runs) {
      const std::vector<float> got = RunPrompt(&backend, c, prompt, r.chunks, r.block_size, r.companion, kv_dtype);
      ASSERT_EQ(got.size(), whole.size()) << type << r.what;
      for (size_t pos = 0; pos < prompt.size(); ++pos) {
        ASSERT_TRUE(SameBits(&got[pos * c.vocab_size], &whole[pos * c.vocab_size], c.vocab_size))
            << type << r.what << ": position " << pos << " differs from the all-at-once run";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillChunkingTest,
                         ::testing::Values(Shape{"d16_g2", 64, 4, 2},    // head dim 16, GQA group 2
                                           Shape{"d64_g3", 384, 6, 2}),  // the default model's head dim and group
                         [](const ::testing::TestParamInfo<Shape>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace beacon
