// Attention-mass recall against a recorded reference, on a hand-built cache
// whose slots hold hand-chosen positions per (layer, KV head).
#include "eval/recording_policy.h"

#include <vector>

#include "gtest/gtest.h"
#include "kv/store/kv_cache.h"

namespace beacon::eval {
namespace {

PolicyModelInfo TwoLayerInfo() {
  PolicyModelInfo m;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;  // group of 2
  m.head_dim = 4;
  return m;
}

// Writes `positions[layer][kv_head]` into the first slots of `kv`.
void SetPositions(KvCache* cache, SequenceKv* kv, const std::vector<std::vector<std::vector<int32_t>>>& positions) {
  const int32_t n = static_cast<int32_t>(positions[0][0].size());
  ASSERT_TRUE(kv->Reserve(n).ok());
  const int bs = cache->shape().block_size;
  for (size_t l = 0; l < positions.size(); ++l) {
    for (size_t h = 0; h < positions[l].size(); ++h) {
      for (int32_t s = 0; s < n; ++s) {
        cache->Positions(static_cast<int>(l), kv->block_ids()[s / bs], static_cast<int>(h))[s % bs] =
            positions[l][h][s];
      }
    }
  }
  kv->CommitSlots(n);
}

TEST(RecordingPolicyTest, KeepsTheLatestDecodeStepPerLayerAndHead) {
  RecordingPolicy rec(TwoLayerInfo());
  EXPECT_TRUE(rec.wants_attention());
  EXPECT_TRUE(rec.Probs(0, 0, 0).empty());
  const std::vector<float> first = {0.5f, 0.5f, 0.25f, 0.75f};  // [group 2][2 slots]
  rec.ObserveAttention(1, 1, first.data(), 2, 2);
  const std::vector<float> second = {0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f};  // [2][3]
  rec.ObserveAttention(1, 1, second.data(), 2, 3);
  ASSERT_EQ(rec.n_slots(1, 1), 3);
  EXPECT_EQ(rec.Probs(1, 1, 1)[2], 0.8f);
  EXPECT_EQ(rec.Probs(1, 1, 0)[0], 0.2f);
  EXPECT_TRUE(rec.Probs(0, 1, 0).empty());
}

TEST(AttentionRecallTest, MatchesAHandComputedCase) {
  const PolicyModelInfo m = TwoLayerInfo();
  RecordingPolicy rec(m);
  // The reference attended over positions 0..5 at this step; rows are the
  // two query heads of each KV head's group.
  const std::vector<float> l0h0 = {0.4f, 0.1f, 0.1f, 0.1f, 0.1f, 0.2f,   // g0
                                   0.0f, 0.0f, 0.5f, 0.0f, 0.0f, 0.5f};  // g1
  const std::vector<float> l0h1 = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.5f, 0.2f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f};
  const std::vector<float> l1h0 = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f};
  const std::vector<float> l1h1 = {0.3f, 0.3f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.3f, 0.3f};
  rec.ObserveAttention(0, 0, l0h0.data(), 2, 6);
  rec.ObserveAttention(0, 1, l0h1.data(), 2, 6);
  rec.ObserveAttention(1, 0, l1h0.data(), 2, 6);
  rec.ObserveAttention(1, 1, l1h1.data(), 2, 6);

  KvCacheShape shape{2, 2, 4, 2};  // 2 layers, 2 KV heads, head dim 4, blocks of 2 slots
  KvCache cache(shape, 8);
  SequenceKv kv(&cache);
  // A compressed cache of 3 slots: each (layer, head) kept its own positions.
  SetPositions(&cache, &kv, {{{0, 2, 5}, {0, 1, 5}}, {{1, 2, 3}, {3, 4, 5}}});
  // Per query head, the mass on the kept positions:
  //   l0h0: g0 0.4+0.1+0.2 = 0.7, g1 0.5+0.5 = 1.0
  //   l0h1: g0 0.1+0.1+0.5 = 0.7, g1 0.2+0.2+0.1 = 0.5
  //   l1h0: g0 0,                g1 0
  //   l1h1: g0 0.1+0.1+0.1 = 0.3, g1 0.1+0.3+0.3 = 0.7
  // Mean over 2 layers x 4 query heads: 3.9 / 8.
  std::vector<int32_t> scratch;
  EXPECT_NEAR(AttentionRecall(rec, kv, m, &scratch), 3.9 / 8, 1e-6);

  // A cache holding every position recalls all the mass.
  SequenceKv full(&cache);
  const std::vector<int32_t> all = {0, 1, 2, 3, 4, 5};
  SetPositions(&cache, &full, {{all, all}, {all, all}});
  EXPECT_NEAR(AttentionRecall(rec, full, m, &scratch), 1.0, 1e-6);
}

}  // namespace
}  // namespace beacon::eval
