// CompactLayer + Truncate: every head's slots hold exactly the chosen K, V and
// positions in order, and whole tail blocks go back to the pool.
#include "kv/store/compaction.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

struct Snapshot {
  std::vector<float> k, v;  // [slot][head_dim]
  std::vector<int32_t> pos;
};

// Slot data of (layer, head) read through the block table.
Snapshot Read(KvCache& cache, const SequenceKv& seq, int layer, int head) {
  const KvCacheShape& sh = cache.shape();
  Snapshot out;
  for (int32_t s = 0; s < seq.num_slots(); ++s) {
    const int32_t b = seq.block_ids()[s / sh.block_size];
    const int off = s % sh.block_size;
    const float* k = cache.K(layer, b, head) + off * sh.head_dim;
    const float* v = cache.V(layer, b, head) + off * sh.head_dim;
    out.k.insert(out.k.end(), k, k + sh.head_dim);
    out.v.insert(out.v.end(), v, v + sh.head_dim);
    out.pos.push_back(cache.Positions(layer, b, head)[off]);
  }
  return out;
}

// n_keep distinct ascending slots of [0, n).
std::vector<int32_t> RandomKeep(int32_t n, int32_t n_keep, std::mt19937& rng) {
  std::vector<int32_t> all(n);
  for (int32_t i = 0; i < n; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n_keep);
  std::sort(all.begin(), all.end());
  return all;
}

TEST(CompactLayer, MovesChosenSlotsToTheFrontPerHeadAndReturnsTailBlocks) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int block_size = 1 + static_cast<int>(rng() % 6);
    const int32_t total_blocks = 128;  // 100 slots at block size 1
    kvtest::TestSequence seq(m, block_size, total_blocks);
    const int32_t n = 1 + static_cast<int32_t>(rng() % 100);
    seq.Append(kvtest::AscendingPositions(n, 3, rng), rng);
    const int32_t n_keep = 1 + static_cast<int32_t>(rng() % n);
    const int d = m.head_dim;

    std::vector<std::vector<Snapshot>> before(m.n_layers);
    std::vector<std::vector<std::vector<int32_t>>> keep(m.n_layers);
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h) {
        before[l].push_back(Read(seq.cache(), seq.kv(), l, h));
        keep[l].push_back(RandomKeep(n, n_keep, rng));  // a different set per (layer, head)
      }
    }
    const std::vector<int32_t> kept_block_ids(seq.kv().block_ids().begin(),
                                              seq.kv().block_ids().begin() + (n_keep + block_size - 1) / block_size);
    for (int l = 0; l < m.n_layers; ++l) CompactLayer(&seq.cache(), seq.kv(), l, keep[l]);
    seq.kv().Truncate(n_keep);

    ASSERT_EQ(seq.kv().num_slots(), n_keep);
    const int32_t blocks = (n_keep + block_size - 1) / block_size;
    ASSERT_EQ(seq.kv().num_blocks(), blocks);
    EXPECT_EQ(seq.kv().block_ids(), kept_block_ids);  // the head of the table survives
    EXPECT_EQ(seq.cache().pool().num_free(), total_blocks - blocks);
    EXPECT_EQ(seq.cache().pool().num_used(), blocks);
    for (int l = 0; l < m.n_layers; ++l) {
      for (int h = 0; h < m.n_kv_heads; ++h) {
        const Snapshot after = Read(seq.cache(), seq.kv(), l, h);
        const Snapshot& b = before[l][h];
        for (int32_t i = 0; i < n_keep; ++i) {
          const int32_t from = keep[l][h][i];
          ASSERT_EQ(after.pos[i], b.pos[from]) << "trial " << trial << " l" << l << " h" << h << " slot " << i;
          ASSERT_EQ(0, std::memcmp(&after.k[i * d], &b.k[from * d], sizeof(float) * d)) << "K of slot " << i;
          ASSERT_EQ(0, std::memcmp(&after.v[i * d], &b.v[from * d], sizeof(float) * d)) << "V of slot " << i;
        }
      }
    }
    seq.kv().Release();
    EXPECT_EQ(seq.cache().pool().num_free(), total_blocks);
  }
}

TEST(CompactLayer, IdentityKeepChangesNothing) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(8);
  kvtest::TestSequence seq(m, 4, 16);
  seq.Append(kvtest::AscendingPositions(23, 2, rng), rng);
  const Snapshot b = Read(seq.cache(), seq.kv(), 1, 1);
  std::vector<int32_t> all(23);
  for (int32_t i = 0; i < 23; ++i) all[i] = i;
  const std::vector<std::vector<int32_t>> keep(m.n_kv_heads, all);
  CompactLayer(&seq.cache(), seq.kv(), 1, keep);
  const Snapshot a = Read(seq.cache(), seq.kv(), 1, 1);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.pos, b.pos);
}

TEST(CompactLayer, OtherLayersAreUntouched) {
  const PolicyModelInfo m = kvtest::SmallModel();
  std::mt19937 rng(9);
  kvtest::TestSequence seq(m, 4, 16);
  seq.Append(kvtest::AscendingPositions(30, 1, rng), rng);
  const Snapshot layer1 = Read(seq.cache(), seq.kv(), 1, 0);
  const std::vector<std::vector<int32_t>> keep = {{1, 5, 9, 29}, {0, 2, 3, 4}};
  CompactLayer(&seq.cache(), seq.kv(), 0, keep);
  const Snapshot after = Read(seq.cache(), seq.kv(), 1, 0);
  EXPECT_EQ(after.k, layer1.k);
  EXPECT_EQ(after.pos, layer1.pos);
  EXPECT_EQ(Read(seq.cache(), seq.kv(), 0, 0).pos[3], 29);
  EXPECT_EQ(Read(seq.cache(), seq.kv(), 0, 1).pos[3], 4);
}

}  // namespace
}  // namespace beacon
