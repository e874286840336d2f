// The prefix cache over a real BlockPool: the hash chain identifies a block
// by its tokens and everything before them, idle cached blocks count as free
// and are reclaimed least recently used first (only once truly free blocks
// are gone), and an entry never outlives its block's contents.
#include "kv/serving/prefix_cache.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "kv/store/kv_cache.h"

namespace beacon {
namespace prefix_cache_test {
namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> Tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence that "ran" `tokens`: its blocks, inserted as full prompt blocks.
std::vector<BlockHandle> RunAndInsert(BlockPool* pool, PrefixCache* cache, const std::vector<int32_t>& tokens) {
  const int32_t n = static_cast<int32_t>(tokens.size()) / kBs;
  std::vector<BlockHandle> blocks = *pool->Allocate(n);
  std::vector<int32_t> ids;
  for (const BlockHandle& h : blocks) ids.push_back(h.id());
  cache->Insert(tokens, ids, n);
  return blocks;
}

TEST(PrefixCache, FindsTheLongestCachedRunOfLeadingBlocks) {
  BlockPool pool(16);
  PrefixCache cache(&pool, kBs, 7);
  std::vector<BlockHandle> a = RunAndInsert(&pool, &cache, Tokens(12));
  EXPECT_EQ(cache.num_blocks(), 3);
  EXPECT_EQ(pool.num_cached(), 3);

  // The same 12 tokens and then others: three blocks; a cap stops earlier.
  std::vector<int32_t> longer = Tokens(12);
  longer.insert(longer.end(), {1, 2, 3, 4, 5});
  PrefixMatch m = cache.Find(longer, 100);
  ASSERT_EQ(m.blocks(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.block_ids[i], a[i].id());
  EXPECT_EQ(m.idle, 0);  // `a` still holds them
  EXPECT_EQ(cache.Find(longer, 2).blocks(), 2);

  // A different second block ends the run there.
  std::vector<int32_t> diverge = Tokens(12);
  diverge[5] = 9999;
  EXPECT_EQ(cache.Find(diverge, 100).blocks(), 1);
  // A partial block never matches.
  EXPECT_EQ(cache.Find(Tokens(3), 100).blocks(), 0);
}

TEST(PrefixCache, ABlockIsIdentifiedByEverythingBeforeIt) {
  BlockPool pool(16);
  PrefixCache cache(&pool, kBs, 7);
  std::vector<BlockHandle> a = RunAndInsert(&pool, &cache, Tokens(8));
  // Block 1's tokens (104..107) after another first block: not the cached one.
  std::vector<int32_t> other = {1, 2, 3, 4, 104, 105, 106, 107};
  EXPECT_EQ(cache.Find(other, 100).blocks(), 0);
  EXPECT_EQ(cache.Find(Tokens(8), 100).blocks(), 2);
  // The salt (model, KV dtype, RoPE table) is the first parent: parts in
  // another order are another salt.
  EXPECT_NE(PrefixCacheSalt(std::vector<uint64_t>{1, 2}), PrefixCacheSalt(std::vector<uint64_t>{2, 1}));
}

// Partitions (issue 35): a tenant's blocks are found only by that tenant,
// the shared partition's only by requests without one.
TEST(PrefixCache, APartitionFindsOnlyItsOwnBlocks) {
  BlockPool pool(16);
  PrefixCache cache(&pool, kBs, 7);
  std::vector<BlockHandle> shared = RunAndInsert(&pool, &cache, Tokens(8));
  EXPECT_EQ(cache.Find(Tokens(8), 100, /*partition=*/11).blocks(), 0);
  EXPECT_EQ(cache.Find(Tokens(8), 100, /*partition=*/12).blocks(), 0);

  // Tenant 11 computes the same prompt itself: its own copies, kept apart.
  std::vector<BlockHandle> t11 = *pool.Allocate(2);
  const std::vector<int32_t> ids = {t11[0].id(), t11[1].id()};
  cache.Insert(Tokens(8), ids, 2, /*partition=*/11);
  EXPECT_EQ(cache.num_blocks(), 4);
  PrefixMatch m = cache.Find(Tokens(8), 100, 11);
  ASSERT_EQ(m.blocks(), 2);
  EXPECT_EQ(m.block_ids[0], t11[0].id());
  EXPECT_EQ(m.block_ids[1], t11[1].id());
  EXPECT_EQ(cache.Find(Tokens(8), 100, 12).blocks(), 0);  // another tenant: nothing
  PrefixMatch s = cache.Find(Tokens(8), 100);             // no tenant: the shared copies
  ASSERT_EQ(s.blocks(), 2);
  EXPECT_EQ(s.block_ids[0], shared[0].id());
  // A partition is no prefix: its first block is not the shared chain's.
  EXPECT_EQ(cache.Find(Tokens(4), 100, 11).block_ids, std::vector<int32_t>{t11[0].id()});
}

TEST(PrefixCache, ReleasedBlocksStayReusableAndCountAsFree) {
  BlockPool pool(8);
  PrefixCache cache(&pool, kBs, 7);
  {
    std::vector<BlockHandle> a = RunAndInsert(&pool, &cache, Tokens(8));
    EXPECT_EQ(pool.num_used(), 2);
  }
  // Nobody holds them: idle, free for allocation, still found.
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.num_free(), 8);
  EXPECT_EQ(pool.num_idle(), 2);
  PrefixMatch m = cache.Find(Tokens(8), 100);
  ASSERT_EQ(m.blocks(), 2);
  EXPECT_EQ(m.idle, 2);
  std::vector<BlockHandle> taken = cache.Take(m);
  EXPECT_EQ(pool.num_idle(), 0);
  EXPECT_EQ(pool.num_used(), 2);
  EXPECT_EQ(pool.refcount(taken[0].id()), 1);
  // A second taker shares them (refcount 2), the pool counts them once.
  std::vector<BlockHandle> again = cache.Take(cache.Find(Tokens(8), 100));
  EXPECT_EQ(pool.refcount(taken[0].id()), 2);
  EXPECT_EQ(pool.num_used(), 2);
}

TEST(PrefixCache, AllocationReclaimsIdleBlocksLeastRecentlyUsedFirstAndOnlyWhenNeeded) {
  BlockPool pool(4);
  PrefixCache cache(&pool, kBs, 7);
  // Two cached prefixes of one block each, released in the order A, B.
  std::vector<int32_t> ta = Tokens(4, 100), tb = Tokens(4, 200);
  std::vector<BlockHandle> a = RunAndInsert(&pool, &cache, ta);
  std::vector<BlockHandle> b = RunAndInsert(&pool, &cache, tb);
  a.clear();
  b.clear();
  EXPECT_EQ(pool.num_idle(), 2);
  // Two truly free blocks remain: taking them reclaims nothing.
  std::vector<BlockHandle> x = *pool.Allocate(2);
  EXPECT_EQ(cache.num_blocks(), 2);
  // The next block reclaims A (released first), not B.
  std::vector<BlockHandle> y = *pool.Allocate(1);
  EXPECT_EQ(cache.num_blocks(), 1);
  EXPECT_EQ(cache.Find(ta, 1).blocks(), 0);
  EXPECT_EQ(cache.Find(tb, 1).blocks(), 1);
  // Using B makes it recent; then the pool is full and it is reclaimed last.
  cache.Take(cache.Find(tb, 1)).clear();
  std::vector<BlockHandle> z = *pool.Allocate(1);
  EXPECT_EQ(cache.num_blocks(), 0);
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.Allocate(1).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(PrefixCache, ContentCachedTwiceKeepsTheFirstCopy) {
  BlockPool pool(8);
  PrefixCache cache(&pool, kBs, 7);
  std::vector<BlockHandle> a = RunAndInsert(&pool, &cache, Tokens(8));
  std::vector<BlockHandle> b = RunAndInsert(&pool, &cache, Tokens(8));  // computed again, concurrently
  EXPECT_EQ(cache.num_blocks(), 2);
  EXPECT_FALSE(pool.cached(b[0].id()));
  b.clear();  // the duplicate is private: freed, not idle
  EXPECT_EQ(pool.num_idle(), 0);
  EXPECT_EQ(cache.Find(Tokens(8), 100).block_ids[0], a[0].id());
}

TEST(PrefixCache, ClearAndDestructionFreeIdleBlocks) {
  BlockPool pool(8);
  {
    PrefixCache cache(&pool, kBs, 7);
    std::vector<BlockHandle> held = RunAndInsert(&pool, &cache, Tokens(4, 1));
    RunAndInsert(&pool, &cache, Tokens(8, 50)).clear();
    EXPECT_EQ(pool.num_idle(), 2);
    cache.Clear();
    EXPECT_EQ(pool.num_idle(), 0);
    EXPECT_EQ(pool.num_cached(), 0);
    EXPECT_FALSE(pool.cached(held[0].id()));
    RunAndInsert(&pool, &cache, Tokens(8, 50)).clear();
  }
  // The cache is gone: its idle blocks are plain free blocks again.
  EXPECT_EQ(pool.num_idle(), 0);
  EXPECT_EQ(pool.num_free(), 8);
  std::vector<BlockHandle> all = *pool.Allocate(8);  // no listener to call
}

// A sequence adopting cached blocks: they are its leading blocks, held by
// reference, and its own blocks come after them.
TEST(PrefixCache, SequenceKvAdoptsBlocksAsItsSharedLead) {
  KvCache kv(KvCacheShape{1, 1, 1, kBs}, 8);
  PrefixCache cache(&kv.pool(), kBs, 7);
  SequenceKv first(&kv);
  ASSERT_TRUE(first.Reserve(10).ok());
  first.CommitSlots(10);
  cache.Insert(Tokens(10), first.block_ids(), 2);
  SequenceKv second(&kv);
  second.AdoptBlocks(cache.Take(cache.Find(Tokens(10), 2)));
  EXPECT_EQ(second.num_slots(), 8);
  EXPECT_EQ(second.shared_blocks(), 2);
  EXPECT_EQ(second.own_blocks(), 0);
  ASSERT_TRUE(second.Reserve(11).ok());
  EXPECT_EQ(second.own_blocks(), 1);
  EXPECT_EQ(kv.pool().num_used(), 4);  // 3 of first's + 1 of second's
  first.Release();
  EXPECT_EQ(kv.pool().num_used(), 3);  // the shared two live on in second
  second.Release();
  EXPECT_EQ(kv.pool().num_used(), 0);
  EXPECT_EQ(kv.pool().num_idle(), 2);
}

TEST(PrefixCache, ShareableOnlyWhenThePolicyStateIgnoresTheSkippedPrompt) {
  EXPECT_TRUE(PrefixShareable(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull)));
  for (KvPolicyKind k : KvPolicyKinds()) {
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(k);
    o.keep_prompt = true;
    o.budget = 128;
    EXPECT_TRUE(PrefixShareable(o)) << KvPolicyName(k);
    if (!o.compresses()) continue;
    o.keep_prompt = false;
    EXPECT_FALSE(PrefixShareable(o)) << KvPolicyName(k);  // compaction moves prompt slots
    o.keep_prompt = true;
    o.budget = o.recent_queries - 1;
    EXPECT_FALSE(PrefixShareable(o)) << KvPolicyName(k);  // the ring could still hold prompt queries
  }
  KvPolicyOptions b = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  b.budget = 128;
  b.beacon_prompt_queries = true;
  EXPECT_FALSE(PrefixShareable(b));  // prompt queries would be beacons
  b.beacon_filter = BeaconFilter::kGlobal;
  EXPECT_TRUE(PrefixShareable(b));
}

// The share arithmetic both engines use: whole blocks before the prompt's
// last token; none under prompt logprobs or a policy that cannot share.
TEST(PrefixCache, ShareablePromptBlocksStopBeforeTheLastPromptToken) {
  const KvPolicyOptions full = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  EXPECT_EQ(ShareablePromptBlocks(full, false, 70, 16), 4);
  EXPECT_EQ(ShareablePromptBlocks(full, false, 65, 16), 4);
  EXPECT_EQ(ShareablePromptBlocks(full, false, 64, 16), 3) << "the last prompt token always runs";
  EXPECT_EQ(ShareablePromptBlocks(full, false, 16, 16), 0);
  EXPECT_EQ(ShareablePromptBlocks(full, false, 0, 16), 0);
  EXPECT_EQ(ShareablePromptBlocks(full, true, 70, 16), 0) << "prompt logprobs run every prompt token";
  KvPolicyOptions evicting = KvPolicyOptions::DefaultsFor(KvPolicyKind::kH2o);
  evicting.keep_prompt = false;
  EXPECT_EQ(ShareablePromptBlocks(evicting, false, 70, 16), 0);
}

// What may be indexed: whole written prompt blocks, bounded by the slots
// held; nothing when compaction may move prompt slots.
TEST(PrefixCache, CacheablePromptBlocksAreTheWrittenWholePromptBlocks) {
  const KvPolicyOptions full = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  EXPECT_EQ(CacheablePromptBlocks(full, 70, 70, 71, 16), 4) << "the partial fifth block is not cacheable";
  EXPECT_EQ(CacheablePromptBlocks(full, 70, 40, 40, 16), 2) << "mid-prefill: the blocks written so far";
  EXPECT_EQ(CacheablePromptBlocks(full, 70, 90, 90, 16), 4) << "replayed generated tokens are not prompt";
  EXPECT_EQ(CacheablePromptBlocks(full, 70, 70, 33, 16), 2) << "at most the slots held";
  KvPolicyOptions b = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  b.keep_prompt = true;
  EXPECT_EQ(CacheablePromptBlocks(b, 70, 70, 71, 16), 4);
  b.keep_prompt = false;
  EXPECT_EQ(CacheablePromptBlocks(b, 70, 70, 71, 16), 0);
}

}  // namespace
}  // namespace prefix_cache_test
}  // namespace beacon
