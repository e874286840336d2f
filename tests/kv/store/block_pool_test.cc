#include "kv/store/block_pool.h"

#include <random>

#include "gtest/gtest.h"
#include "kv/store/kv_cache.h"

namespace beacon {
namespace {

TEST(BlockPool, AllocateIsAllOrNothing) {
  BlockPool pool(4);
  auto a = pool.Allocate(3);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(pool.num_free(), 1);
  auto b = pool.Allocate(2);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("2 blocks requested, 1 of 4 free"), std::string::npos) << b.status();
  EXPECT_EQ(pool.num_free(), 1);  // the failed request took nothing
  a->clear();
  EXPECT_EQ(pool.num_free(), 4);
}

TEST(BlockPool, HandlesReturnBlocksAndShareRefcounts) {
  BlockPool pool(2);
  {
    auto a = pool.Allocate(1);
    ASSERT_TRUE(a.ok());
    BlockHandle shared = (*a)[0].Share();
    EXPECT_EQ(pool.refcount(shared.id()), 2);
    (*a)[0].Reset();
    EXPECT_EQ(pool.num_free(), 1);  // still held by `shared`
    BlockHandle moved = std::move(shared);
    EXPECT_FALSE(shared.valid());
    EXPECT_EQ(pool.num_free(), 1);
  }
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.Allocate(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

// Thousands of random reserve / commit / truncate / release sequences: the
// pool always accounts for exactly the blocks the sequences hold, and returns
// to its baseline at the end.
TEST(SequenceKv, RandomizedNoLeak) {
  KvCacheShape shape{2, 2, 4, 4};
  KvCache cache(shape, 64);
  std::mt19937 rng(11);
  std::vector<SequenceKv> seqs;
  for (int i = 0; i < 8; ++i) seqs.emplace_back(&cache);
  for (int step = 0; step < 5000; ++step) {
    SequenceKv& s = seqs[rng() % seqs.size()];
    switch (rng() % 4) {
      case 0:
      case 1: {
        const int32_t want = s.num_slots() + static_cast<int32_t>(rng() % 9);
        const int32_t free_before = cache.pool().num_free();
        absl::Status st = s.Reserve(want);
        if (st.ok()) {
          s.CommitSlots(want);
        } else {
          EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
          EXPECT_EQ(cache.pool().num_free(), free_before);
        }
        break;
      }
      case 2: s.Truncate(static_cast<int32_t>(rng() % (s.num_slots() + 1))); break;
      default: s.Release();
    }
    int32_t held = 0;
    for (const SequenceKv& q : seqs) {
      held += q.num_blocks();
      ASSERT_LE(q.num_slots(), q.capacity());
      ASSERT_LT(q.capacity() - q.num_slots(), shape.block_size);  // no idle tail block
    }
    ASSERT_EQ(held, cache.pool().num_used());
  }
  for (SequenceKv& s : seqs) s.Release();
  EXPECT_EQ(cache.pool().num_free(), 64);
}

TEST(KvCache, LayoutAddressesAreDisjoint) {
  KvCacheShape shape{3, 2, 8, 4};
  KvCache cache(shape, 5);
  EXPECT_EQ(cache.block_stride(), 2u * 4 * 8);
  EXPECT_EQ(cache.K(1, 2, 1) - cache.K(1, 0, 0), 2 * 64 + 32);
  EXPECT_EQ(cache.Positions(2, 4, 1) - cache.Positions(2, 0, 0), 4 * 8 + 4);
  EXPECT_EQ(cache.BytesPerToken(), 2u * 3 * 2 * 8 * sizeof(float));
}

}  // namespace
}  // namespace beacon

namespace beacon {
namespace {

TEST(SequenceKv, ShareFromHoldsTheBlocksOnceUntilTheLastHolderGoes) {
  KvCacheShape shape{2, 2, 4, 4};  // block size 4
  KvCache cache(shape, 16);
  SequenceKv donor(&cache), a(&cache), b(&cache);
  ASSERT_TRUE(donor.Reserve(10).ok());
  donor.CommitSlots(10);
  EXPECT_EQ(cache.pool().num_used(), 3);
  a.ShareFrom(donor, 8);
  b.ShareFrom(donor, 8);
  EXPECT_EQ(cache.pool().num_used(), 3);  // two full blocks shared, not copied
  EXPECT_EQ(a.num_slots(), 8);
  EXPECT_EQ(a.block_ids()[0], donor.block_ids()[0]);
  EXPECT_EQ(cache.pool().refcount(donor.block_ids()[1]), 3);
  // Each appends into a block of its own past the shared ones.
  ASSERT_TRUE(a.Reserve(9).ok());
  a.CommitSlots(9);
  EXPECT_EQ(cache.pool().num_used(), 4);
  EXPECT_NE(a.block_ids()[2], donor.block_ids()[2]);
  donor.Release();
  EXPECT_EQ(cache.pool().num_used(), 3);  // the shared two stay while a and b hold them
  a.Release();
  EXPECT_EQ(cache.pool().num_used(), 2);
  b.Release();
  EXPECT_EQ(cache.pool().num_used(), 0);
}

}  // namespace
}  // namespace beacon
