// The CPU forward pass on tiny dummy models of each family: batching,
// chunking and the order of sequences in a batch must not change a
// sequence's logits; bad input fails cleanly and changes nothing.
// (Numerical agreement with an independent model is checked against the
// NumPy reference in tests/reference/.)
#include "engine/cpu_backend.h"

#include <cmath>
#include <memory>

#include "gtest/gtest.h"
#include "model/model_loader.h"

namespace beacon {
namespace {

std::unique_ptr<LoadedModel> Tiny(const std::string& family) {
  auto m = LoadDummyModel(std::string(BEACON_SOURCE_DIR) + "/tests/data/tiny-" + family + ".json", 42);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::unique_ptr<KvCache> Cache(const ModelConfig& c, int32_t blocks) {
  return std::make_unique<KvCache>(KvCacheShape{c.n_layers, c.n_kv_heads, c.head_dim, 4}, blocks);
}

std::vector<int32_t> Tokens(int n, int salt, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + salt * 11 + 3) % vocab;
  return t;
}

double MaxRelDiff(const float* a, const float* b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

class CpuBackendTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuBackendTest, RaggedBatchEqualsSequencesRunAlone) {
  auto model = Tiny(GetParam());
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->weights.config;
  ThreadPool pool(2);
  CpuBackend backend(&model->weights, &pool);
  auto cache = Cache(c, 64);
  const std::vector<int32_t> a = Tokens(11, 1, c.vocab_size), b = Tokens(5, 2, c.vocab_size);

  // Alone, all logits, in one chunk.
  std::vector<float> la, lb;
  {
    SequenceKv sa(cache.get()), sb(cache.get());
    ForwardEntry ea{&sa, a, 0, true}, eb{&sb, b, 0, true};
    ASSERT_TRUE(backend.Forward(std::span(&ea, 1), &la).ok());
    ASSERT_TRUE(backend.Forward(std::span(&eb, 1), &lb).ok());
  }
  EXPECT_EQ(cache->pool().num_free(), 64);  // released on scope exit

  // Together: `a` in chunks of 3, `b` prefilled then decoding one at a time,
  // with `b` placed before `a` in the batch.
  SequenceKv sa(cache.get()), sb(cache.get());
  std::vector<float> out;
  int32_t da = 0, db = 0;
  while (da < 11) {
    std::vector<ForwardEntry> batch;
    const int32_t nb = db == 0 ? 3 : 1;
    if (db < 5) batch.push_back({&sb, std::span<const int32_t>(b).subspan(db, nb), db, true});
    const int32_t na = std::min(3, 11 - da);
    batch.push_back({&sa, std::span<const int32_t>(a).subspan(da, na), da, true});
    ASSERT_TRUE(backend.Forward(batch, &out).ok());
    size_t row = 0;
    if (db < 5) {
      for (int i = 0; i < nb; ++i, ++row) {
        EXPECT_LT(MaxRelDiff(&out[row * c.vocab_size], &lb[(db + i) * c.vocab_size], c.vocab_size), 1e-4)
            << "sequence b position " << db + i;
      }
      db += nb;
    }
    for (int i = 0; i < na; ++i, ++row) {
      EXPECT_LT(MaxRelDiff(&out[row * c.vocab_size], &la[(da + i) * c.vocab_size], c.vocab_size), 1e-4)
          << "sequence a position " << da + i;
    }
    da += na;
  }
  EXPECT_EQ(sa.num_slots(), 11);
  EXPECT_EQ(sb.num_slots(), 5);
  EXPECT_EQ(cache->shape().block_size, 4);
  EXPECT_EQ(cache->pool().num_used(), 3 + 2);
}

TEST_P(CpuBackendTest, LastTokenLogitsOnlyByDefault) {
  auto model = Tiny(GetParam());
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->weights.config;
  CpuBackend backend(&model->weights, nullptr);
  auto cache = Cache(c, 16);
  SequenceKv s1(cache.get()), s2(cache.get());
  const std::vector<int32_t> t = Tokens(6, 5, c.vocab_size);
  std::vector<float> all, last;
  ForwardEntry e1{&s1, t, 0, true}, e2{&s2, t, 0, false};
  ASSERT_TRUE(backend.Forward(std::span(&e1, 1), &all).ok());
  ASSERT_TRUE(backend.Forward(std::span(&e2, 1), &last).ok());
  ASSERT_EQ(all.size(), 6u * c.vocab_size);
  ASSERT_EQ(last.size(), 1u * c.vocab_size);
  EXPECT_LT(MaxRelDiff(last.data(), &all[5 * c.vocab_size], c.vocab_size), 1e-5);
}

TEST_P(CpuBackendTest, BadInputFailsAndChangesNothing) {
  auto model = Tiny(GetParam());
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->weights.config;
  CpuBackend backend(&model->weights, nullptr);
  auto cache = Cache(c, 4);  // 16 slots in all
  SequenceKv ok_seq(cache.get()), other(cache.get());
  std::vector<float> logits;
  const std::vector<int32_t> good = Tokens(6, 1, c.vocab_size);
  ForwardEntry first{&ok_seq, good, 0, false};
  ASSERT_TRUE(backend.Forward(std::span(&first, 1), &logits).ok());
  const int32_t used = cache->pool().num_used();

  std::vector<int32_t> bad = {1, c.vocab_size, 2};
  ForwardEntry e{&other, bad, 0, false};
  absl::Status s = backend.Forward(std::span(&e, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token id 256"), std::string::npos) << s;

  bad = {-1};
  s = backend.Forward(std::span(&e, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  // Past the context length.
  ForwardEntry far{&other, good, c.context_length - 2, false};
  s = backend.Forward(std::span(&far, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("context length"), std::string::npos) << s;

  // The pool cannot hold both: the step fails as a whole, nothing is kept.
  const std::vector<int32_t> big = Tokens(12, 3, c.vocab_size);
  ForwardEntry grow{&ok_seq, good, 6, false}, huge{&other, big, 0, false};
  std::vector<ForwardEntry> batch = {grow, huge};
  s = backend.Forward(batch, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(ok_seq.num_slots(), 6);
  EXPECT_EQ(other.num_slots(), 0);
  EXPECT_EQ(cache->pool().num_used(), used);

  // The same sequence twice in one batch.
  batch = {grow, grow};
  EXPECT_EQ(backend.Forward(batch, &logits).code(), absl::StatusCode::kInvalidArgument);

  // And the good sequence still continues correctly afterwards.
  ForwardEntry next{&ok_seq, std::span<const int32_t>(good).first(2), 6, false};
  EXPECT_TRUE(backend.Forward(std::span(&next, 1), &logits).ok());
  EXPECT_EQ(ok_seq.num_slots(), 8);
}

INSTANTIATE_TEST_SUITE_P(Families, CpuBackendTest, ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
}  // namespace beacon
