// The host half of a CUDA step (engine/cuda/forward_plan.h): runs without a GPU.
#include "engine/cuda/forward_plan.h"

#include <vector>

#include "gtest/gtest.h"
#include "kv/store/kv_cache.h"

namespace beacon {
namespace forward_plan_test {
namespace {

KvCacheShape Shape() {
  KvCacheShape s;
  s.n_layers = 2;
  s.n_kv_heads = 2;
  s.head_dim = 8;
  s.block_size = 4;
  return s;
}

TEST(StepPlanTest, OffsetsAreAlignedAndDisjoint) {
  const ForwardPlanOffsets o = PlanOffsets(5, 3, 2, 16);
  const size_t starts[] = {o.token_ids,  o.tok_seq,   o.tok_slot, o.tok_pos,
                           o.logit_rows, o.seq_first, o.seq_n,    o.block_tables};
  const size_t lens[] = {5, 5, 5, 5, 3, 2, 2, 32};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(starts[i] % 4, 0u) << i;  // 16-byte boundaries
    if (i > 0) {
      EXPECT_GE(starts[i], starts[i - 1] + lens[i - 1]) << i;
    }
  }
  EXPECT_GE(o.total, o.block_tables + 32);
  // Offsets depend only on the counts: the same shape, the same layout.
  const ForwardPlanOffsets again = PlanOffsets(5, 3, 2, 16);
  EXPECT_EQ(again.block_tables, o.block_tables);
  EXPECT_EQ(again.total, o.total);
}

TEST(StepPlanTest, RaggedBatchFlattensInOrder) {
  KvCache cache(Shape(), 64, KvStorage::kDevice);
  SequenceKv a(&cache), b(&cache);
  // a already holds 6 slots (2 blocks); b is new.
  ASSERT_TRUE(a.Reserve(6).ok());
  a.CommitSlots(6);
  std::vector<int32_t> ta = {11}, tb = {21, 22, 23};
  ASSERT_TRUE(a.Reserve(7).ok());
  ASSERT_TRUE(b.Reserve(3).ok());
  const ForwardEntry batch[] = {ForwardEntry{&a, ta, 6, false}, ForwardEntry{&b, tb, 0, true}};
  ForwardPlan p;
  BuildForwardPlan(batch, &p);
  EXPECT_EQ(p.n_tokens, 4);
  EXPECT_EQ(p.n_rows, 4);  // a: its last token; b: all three
  EXPECT_EQ(p.n_seqs, 2);
  EXPECT_FALSE(p.all_decode);
  EXPECT_EQ(p.max_seq_tokens, 3);
  EXPECT_EQ(p.stride, 16);
  EXPECT_TRUE(p.rows_are_tokens);
  auto at = [&](size_t off, size_t i) { return p.packed[off + i]; };
  const int32_t ids[] = {11, 21, 22, 23}, seq[] = {0, 1, 1, 1}, slot[] = {6, 0, 1, 2}, pos[] = {6, 0, 1, 2};
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(at(p.offsets.token_ids, t), ids[t]);
    EXPECT_EQ(at(p.offsets.tok_seq, t), seq[t]);
    EXPECT_EQ(at(p.offsets.tok_slot, t), slot[t]);
    EXPECT_EQ(at(p.offsets.tok_pos, t), pos[t]);
    EXPECT_EQ(at(p.offsets.logit_rows, t), t);
  }
  EXPECT_EQ(at(p.offsets.seq_first, 0), 0);
  EXPECT_EQ(at(p.offsets.seq_first, 1), 1);
  EXPECT_EQ(at(p.offsets.seq_n, 0), 1);
  EXPECT_EQ(at(p.offsets.seq_n, 1), 3);
  for (size_t i = 0; i < a.block_ids().size(); ++i) EXPECT_EQ(at(p.offsets.block_tables, i), a.block_ids()[i]);
  for (size_t i = 0; i < b.block_ids().size(); ++i) {
    EXPECT_EQ(at(p.offsets.block_tables, p.stride + i), b.block_ids()[i]);
  }
  a.Release();
  b.Release();
}

TEST(StepPlanTest, DecodeBatchGathersLastRowsAndPicksAPowerOfTwoStride) {
  KvCache cache(Shape(), 256, KvStorage::kDevice);
  SequenceKv a(&cache), b(&cache);
  ASSERT_TRUE(a.Reserve(4 * 20).ok());  // 20 blocks: stride rounds up to 32
  a.CommitSlots(79);
  ASSERT_TRUE(b.Reserve(2).ok());
  b.CommitSlots(1);
  std::vector<int32_t> ta = {5}, tb = {6};
  const ForwardEntry batch[] = {ForwardEntry{&a, ta, 100, false}, ForwardEntry{&b, tb, 1, false}};
  ForwardPlan p;
  BuildForwardPlan(batch, &p);
  EXPECT_TRUE(p.all_decode);
  EXPECT_EQ(p.stride, 32);
  EXPECT_EQ(p.n_rows, 2);
  EXPECT_EQ(p.packed[p.offsets.tok_slot + 0], 79);
  EXPECT_EQ(p.packed[p.offsets.tok_pos + 0], 100);  // positions need not equal slots (after eviction)
  EXPECT_EQ(p.packed[p.offsets.tok_slot + 1], 1);
  a.Release();
  b.Release();
}

// FlashInfer's pages (kernels/flashinfer/decode.h): the CSR form of the
// slots each entry's last token attends to, at page edges and mid-page.
TEST(StepPlanTest, PagesListTheBlocksOfEachEntrysSlots) {
  KvCache cache(Shape(), 256, KvStorage::kDevice);  // block_size 4
  SequenceKv a(&cache), b(&cache), c(&cache);
  ASSERT_TRUE(a.Reserve(9).ok());  // 8 committed + the new token's slot 8: 3 pages, 1 slot in the last
  a.CommitSlots(8);
  ASSERT_TRUE(b.Reserve(1).ok());   // a new sequence's first token: 1 page of 1
  ASSERT_TRUE(c.Reserve(12).ok());  // slot 11: 3 full pages
  c.CommitSlots(11);
  std::vector<int32_t> ta = {5}, tb = {6}, tc = {7};
  const ForwardEntry batch[] = {ForwardEntry{&a, ta, 8, false}, ForwardEntry{&b, tb, 0, false},
                                ForwardEntry{&c, tc, 40, false}};
  ForwardPlan p;
  BuildForwardPlan(batch, &p, /*page_size=*/4);
  const ForwardPlanOffsets plain = PlanOffsets(3, 3, 3, p.stride);
  EXPECT_EQ(p.offsets.block_tables, plain.block_tables);  // the other arrays stay where they were
  EXPECT_GE(p.offsets.pages_indptr, plain.total);
  EXPECT_EQ(p.offsets.pages_indptr % 4, 0u);
  EXPECT_GE(p.offsets.pages_indices, p.offsets.pages_indptr + 4);
  EXPECT_GE(p.offsets.pages_last, p.offsets.pages_indices + 3 * p.stride);
  EXPECT_GE(p.offsets.pages_qo, p.offsets.pages_last + 3);
  EXPECT_GE(p.offsets.total, p.offsets.pages_qo + 4);
  const int32_t* indptr = p.packed.data() + p.offsets.pages_indptr;
  const int32_t* indices = p.packed.data() + p.offsets.pages_indices;
  const int32_t* last = p.packed.data() + p.offsets.pages_last;
  EXPECT_EQ(std::vector<int32_t>(indptr, indptr + 4), (std::vector<int32_t>{0, 3, 4, 7}));
  EXPECT_EQ(std::vector<int32_t>(last, last + 3), (std::vector<int32_t>{1, 1, 4}));
  const int32_t* qo = p.packed.data() + p.offsets.pages_qo;
  EXPECT_EQ(std::vector<int32_t>(qo, qo + 4), (std::vector<int32_t>{0, 1, 2, 3}));
  std::vector<int32_t> want = a.block_ids();
  want.push_back(b.block_ids()[0]);
  want.insert(want.end(), c.block_ids().begin(), c.block_ids().end());
  EXPECT_EQ(std::vector<int32_t>(indices, indices + 7), want);
  // Without a page size the plan has no pages' arrays.
  ForwardPlan q;
  BuildForwardPlan(batch, &q);
  EXPECT_EQ(q.offsets.total, plain.total);
  a.Release();
  b.Release();
  c.Release();
}

TEST(StepPlanTest, PrefillChunkWithLastLogitOnlyNeedsAGather) {
  KvCache cache(Shape(), 16, KvStorage::kDevice);
  SequenceKv a(&cache);
  std::vector<int32_t> t = {1, 2, 3, 4, 5};
  ASSERT_TRUE(a.Reserve(5).ok());
  const ForwardEntry batch[] = {ForwardEntry{&a, t, 0, false}};
  ForwardPlan p;
  BuildForwardPlan(batch, &p);
  EXPECT_EQ(p.n_rows, 1);
  EXPECT_FALSE(p.rows_are_tokens);
  EXPECT_EQ(p.packed[p.offsets.logit_rows], 4);
  a.Release();
}

}  // namespace
}  // namespace forward_plan_test
}  // namespace beacon
