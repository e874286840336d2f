// The KV cache manager over a real KvCache: it owns each sequence's KV from
// Add to Remove, answers the append arithmetic, indexes prompt blocks as a
// prefill writes them, and hands a sequence holding nothing the leading
// blocks it may take by reference: a sample group's first member's, or the
// prefix cache's. The engines (real and simulated) are tested on it in
// tests/server and tests/scheduler; here each rule alone.
#include "kv/serving/kv_cache_manager.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

constexpr int32_t kBs = 16;

std::vector<int32_t> Prompt(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvSeqSpec Spec(const std::vector<int32_t>& prompt, KvPolicyOptions kv = {}, KvSeqId group = 0) {
  KvSeqSpec s;
  s.prompt_len = static_cast<int32_t>(prompt.size());
  s.prompt = prompt;
  s.kv = kv;
  s.group = group;
  return s;
}

// Writes `n` more slots of the sequence, as a forward pass would.
void Append(KvCacheManager* m, KvSeqId id, int32_t n) {
  SequenceKv* kv = m->kv(id);
  ASSERT_NE(kv, nullptr);
  ASSERT_TRUE(kv->Reserve(kv->num_slots() + n).ok());
  kv->CommitSlots(kv->num_slots() + n);
}

class KvCacheManagerTest : public ::testing::Test {
 protected:
  KvCache cache_{KvCacheShape{1, 1, 1, kBs}, 32};
  KvCacheManager m_{&cache_};
};

TEST_F(KvCacheManagerTest, AddValidatesAndRemoveFreesEverything) {
  KvSeqSpec none;
  EXPECT_EQ(m_.Add(1, none).code(), absl::StatusCode::kInvalidArgument);  // prompt_len 0
  KvSeqSpec wrong = Spec(Prompt(10));
  wrong.prompt_len = 11;
  EXPECT_EQ(m_.Add(1, wrong).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(m_.Add(1, Spec(Prompt(10))).ok());
  EXPECT_EQ(m_.Add(1, Spec(Prompt(10))).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m_.kv(2), nullptr);

  Append(&m_, 1, 40);
  EXPECT_EQ(m_.FreeBlocks(), 32 - 3);
  EXPECT_EQ(m_.OwnBlocks(1), 3);
  EXPECT_EQ(m_.HeldSlots(), 40);
  m_.Remove(1);
  EXPECT_FALSE(m_.contains(1));
  EXPECT_EQ(m_.FreeBlocks(), 32);
  EXPECT_EQ(m_.HeldSlots(), 0);
  m_.Remove(1);  // unknown: ignored
}

TEST_F(KvCacheManagerTest, PromptIdsAreRequiredOnlyWithThePrefixCache) {
  KvSeqSpec counted;
  counted.prompt_len = 5;
  EXPECT_TRUE(m_.Add(1, counted).ok());
  KvCacheManager with_cache(&cache_);
  with_cache.EnablePrefixCache(3);
  EXPECT_EQ(with_cache.Add(1, counted).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KvCacheManagerTest, BlocksToAppendCountsWhatTheTableLacks) {
  ASSERT_TRUE(m_.Add(1, Spec(Prompt(10))).ok());
  EXPECT_EQ(m_.BlocksToAppend(1, 1), 1);
  EXPECT_EQ(m_.BlocksToAppend(1, 17), 2);
  Append(&m_, 1, 10);
  EXPECT_EQ(m_.BlocksToAppend(1, 6), 0);  // fits the block's last 6 slots
  EXPECT_EQ(m_.BlocksToAppend(1, 7), 1);
  EXPECT_EQ(m_.BlocksToAppend(99, 33), 3);  // unknown: as if holding nothing
}

TEST_F(KvCacheManagerTest, PromptBlocksAreIndexedAsWrittenAndTakenByAnother) {
  m_.EnablePrefixCache(7);
  const std::vector<int32_t> p = Prompt(40);
  ASSERT_TRUE(m_.Add(1, Spec(p)).ok());
  ASSERT_TRUE(m_.Add(2, Spec(p)).ok());
  EXPECT_EQ(m_.Probe(2).blocks, 0);  // nothing cached yet

  Append(&m_, 1, 20);  // a first chunk: one whole block written
  m_.OnRan(1, 20, /*prefilling=*/true);
  EXPECT_EQ(m_.prefix_cache()->num_blocks(), 1);
  EXPECT_EQ(m_.Probe(2).blocks, 1);
  Append(&m_, 1, 20);
  m_.OnRan(1, 40, /*prefilling=*/false);
  EXPECT_EQ(m_.prefix_cache()->num_blocks(), 2);

  // Sequence 2 may take the whole blocks before its last prompt token's: 2.
  const KvPrefixProbe probe = m_.Probe(2);
  EXPECT_FALSE(probe.wait);
  EXPECT_EQ(probe.blocks, 2);
  EXPECT_EQ(probe.idle, 0);  // sequence 1 holds them
  EXPECT_EQ(m_.Adopt(2, 40), 32);
  EXPECT_EQ(m_.kv(2)->shared_blocks(), 2);
  EXPECT_EQ(m_.OwnBlocks(2), 0);
  EXPECT_EQ(m_.prefix_queries(), 40);
  EXPECT_EQ(m_.prefix_hits(), 32);
  EXPECT_EQ(m_.HeldSlots(), 40);          // the shared blocks count once
  EXPECT_EQ(m_.Probe(2).blocks, 0);       // holding KV: never again
  EXPECT_EQ(m_.BlocksToAppend(2, 8), 1);  // its own block after the shared ones

  // Once sequence 1 is gone its cached blocks stay, idle when unheld.
  m_.Remove(1);
  m_.Remove(2);
  ASSERT_TRUE(m_.Add(3, Spec(p)).ok());
  EXPECT_EQ(m_.Probe(3).idle, 2);
}

// A sequence of one prefix-cache partition never takes another's blocks,
// and still takes its own partition's.
TEST_F(KvCacheManagerTest, PartitionsKeepTenantsApart) {
  m_.EnablePrefixCache(7);
  const std::vector<int32_t> p = Prompt(40);
  KvSeqSpec a = Spec(p);
  a.cache_partition = 101;
  ASSERT_TRUE(m_.Add(1, a).ok());
  Append(&m_, 1, 40);
  m_.OnRan(1, 40, /*prefilling=*/false);
  EXPECT_EQ(m_.prefix_cache()->num_blocks(), 2);

  KvSeqSpec b = Spec(p);
  b.cache_partition = 202;
  ASSERT_TRUE(m_.Add(2, b).ok());
  EXPECT_EQ(m_.Probe(2).blocks, 0);
  ASSERT_TRUE(m_.Add(3, Spec(p)).ok());  // the shared partition: nothing either
  EXPECT_EQ(m_.Probe(3).blocks, 0);
  ASSERT_TRUE(m_.Add(4, a).ok());  // the same tenant: its blocks
  EXPECT_EQ(m_.Probe(4).blocks, 2);
  EXPECT_EQ(m_.Adopt(4, 40), 32);
}

TEST_F(KvCacheManagerTest, NothingIsSharedThatWouldChangeTheOutput) {
  m_.EnablePrefixCache(7);
  const std::vector<int32_t> p = Prompt(40);
  ASSERT_TRUE(m_.Add(1, Spec(p)).ok());
  Append(&m_, 1, 40);
  m_.OnRan(1, 40, false);

  KvSeqSpec logprobs = Spec(p);
  logprobs.prompt_logprobs = true;  // every prompt row is computed
  ASSERT_TRUE(m_.Add(2, logprobs).ok());
  EXPECT_EQ(m_.Probe(2).blocks, 0);
  EXPECT_EQ(m_.Adopt(2, 40), 0);
  EXPECT_EQ(m_.prefix_queries(), 40);  // looked up all the same

  KvPolicyOptions moving = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  moving.keep_prompt = false;  // compaction moves prompt slots: neither shared nor cached
  ASSERT_TRUE(m_.Add(3, Spec(Prompt(40, 500), moving)).ok());
  Append(&m_, 3, 40);
  m_.OnRan(3, 40, false);
  EXPECT_EQ(m_.prefix_cache()->num_blocks(), 2);  // sequence 1's only
  ASSERT_TRUE(m_.Add(4, Spec(Prompt(40, 500), moving)).ok());
  EXPECT_EQ(m_.Probe(4).blocks, 0);
}

TEST_F(KvCacheManagerTest, AGroupMemberWaitsForItsFirstMemberThenTakesItsPrompt) {
  const std::vector<int32_t> p = Prompt(40);
  ASSERT_TRUE(m_.Add(10, Spec(p, {}, 10)).ok());  // sample 0 (its own group)
  ASSERT_TRUE(m_.Add(11, Spec(p, {}, 10)).ok());
  EXPECT_TRUE(m_.Probe(11).wait);  // sample 0 has not run its prompt
  EXPECT_FALSE(m_.Probe(10).wait);
  Append(&m_, 10, 16);
  m_.OnRan(10, 16, /*prefilling=*/true);
  EXPECT_TRUE(m_.Probe(11).wait);
  Append(&m_, 10, 24);
  m_.OnRan(10, 40, /*prefilling=*/false);
  const KvPrefixProbe probe = m_.Probe(11);
  EXPECT_FALSE(probe.wait);
  EXPECT_EQ(probe.blocks, 2);
  EXPECT_EQ(m_.Adopt(11, 40), 32);  // without the prefix cache
  EXPECT_EQ(m_.kv(11)->block_ids()[1], m_.kv(10)->block_ids()[1]);
  EXPECT_EQ(m_.prefix_queries(), 0);  // the cache is off: nothing counted

  // Sample 0 preempted: a member still to start waits again.
  ASSERT_TRUE(m_.Add(12, Spec(p, {}, 10)).ok());
  m_.Release(10);
  EXPECT_EQ(m_.kv(10)->num_blocks(), 0);
  EXPECT_TRUE(m_.Probe(12).wait);
  // A member that has sampled and was preempted runs its own prompt.
  Append(&m_, 11, 9);
  m_.OnRan(11, 40, false);
  m_.Release(11);
  Append(&m_, 10, 40);
  m_.OnRan(10, 40, false);
  EXPECT_EQ(m_.Probe(11).blocks, 0);
  EXPECT_FALSE(m_.Probe(11).wait);
  EXPECT_EQ(m_.Probe(12).blocks, 2);
}

TEST_F(KvCacheManagerTest, ReleaseGivesBlocksBackAndIndexesAgainOnTheRecompute) {
  m_.EnablePrefixCache(7);
  const std::vector<int32_t> p = Prompt(40);
  ASSERT_TRUE(m_.Add(1, Spec(p)).ok());
  Append(&m_, 1, 40);
  m_.OnRan(1, 40, false);
  m_.Release(1);
  EXPECT_EQ(m_.FreeBlocks(), 32);  // two of them idle, still cached
  EXPECT_EQ(m_.IdleBlocks(), 2);
  // The recompute takes its own blocks back from the cache.
  EXPECT_EQ(m_.Probe(1).blocks, 2);
  EXPECT_EQ(m_.Adopt(1, 48), 32);
  EXPECT_EQ(m_.IdleBlocks(), 0);
  EXPECT_EQ(m_.prefix_queries(), 48);
}

}  // namespace
}  // namespace beacon
