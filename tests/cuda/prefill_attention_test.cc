#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cuda/paged_attention.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/paged_attention_test_util.h"

namespace beacon {
namespace prefill_attention_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;
using namespace attention_test;  // NOLINT: the shared shapes, cache and reference

// One sequence of the batch: its block-table row, the slot of its first
// chunk token (slots below it are earlier chunks) and its chunk length.
struct Seq {
  int row, start, n;
};
// Chunks starting at slot 0 and mid-cache (at, before and after block
// boundaries), single-token sequences (decode rows in a mixed batch, one at
// slot 2000) and lengths around the query tile sizes (8..64 tokens).
const std::vector<Seq> kSeqs = {{3, 0, 37},   {0, 100, 1}, {5, 16, 70}, {1, 250, 5},
                                {2, 2000, 1}, {4, 0, 1},   {6, 33, 64}};

// Token arrays of a batch; sequences sit in the token arrays in reverse
// order, so sequence i's first token is not at a predictable offset.
struct Tokens {
  std::vector<int32_t> seq, slot, first, count;
  int max_len = 0;
};
Tokens Lay(const std::vector<Seq>& seqs) {
  Tokens tk;
  tk.first.resize(seqs.size());
  tk.count.resize(seqs.size());
  for (size_t i = seqs.size(); i-- > 0;) {
    tk.first[i] = static_cast<int32_t>(tk.seq.size());
    tk.count[i] = seqs[i].n;
    tk.max_len = std::max(tk.max_len, seqs[i].n);
    for (int j = 0; j < seqs[i].n; ++j) {
      tk.seq.push_back(seqs[i].row);
      tk.slot.push_back(seqs[i].start + j);
    }
  }
  return tk;
}

TEST(CudaPrefillAttentionTest, MatchesNaiveLoopForChunksAtAnySlot) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::vector<int> row_slots(kSeqs.size());
  for (const Seq& s : kSeqs) row_slots[s.row] = s.start + s.n;
  const Tokens tk = Lay(kSeqs);
  const int64_t n = static_cast<int64_t>(tk.seq.size());
  uint64_t seed = 21;
  for (const Config& c : kConfigs) {
    const HostCache hc = MakeCache(c, row_slots, seed++);
    const int64_t q_stride = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.d;  // a view into fused QKV
    const auto q = RandomBf16(n * q_stride, seed++, kQStddev);
    DeviceBuffer<uint16_t> dk(hc.k.size()), dv(hc.v.size()), dq(q.size()), dout(n * c.nq * c.d);
    DeviceBuffer<int32_t> dtable(hc.table.size()), dseq(n), dslot(n), dfirst(kSeqs.size()), dcount(kSeqs.size());
    BEACON_CUDA_ASSERT_OK(dk.Upload(hc.k));
    BEACON_CUDA_ASSERT_OK(dv.Upload(hc.v));
    BEACON_CUDA_ASSERT_OK(dq.Upload(q));
    BEACON_CUDA_ASSERT_OK(dtable.Upload(hc.table));
    BEACON_CUDA_ASSERT_OK(dseq.Upload(tk.seq));
    BEACON_CUDA_ASSERT_OK(dslot.Upload(tk.slot));
    BEACON_CUDA_ASSERT_OK(dfirst.Upload(tk.first));
    BEACON_CUDA_ASSERT_OK(dcount.Upload(tk.count));
    PagedAttentionParams p;
    p.q = reinterpret_cast<const __nv_bfloat16*>(dq.get());
    p.q_token_stride = q_stride;
    p.out = reinterpret_cast<__nv_bfloat16*>(dout.get());
    p.kv.k = reinterpret_cast<__nv_bfloat16*>(dk.get());
    p.kv.v = reinterpret_cast<__nv_bfloat16*>(dv.get());
    p.kv.layout = hc.layout;
    p.layer = kLayer;
    p.n_q_heads = c.nq;
    p.tables = {dtable.get(), hc.stride};
    p.tok_seq = dseq.get();
    p.tok_slot = dslot.get();
    p.n_tokens = n;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    const std::vector<double> want = NaiveAttention(hc, q, q_stride, c.nq, tk.seq, tk.slot, p.scale);
    // A tight bound and a loose one (the extra query tiles find no tokens).
    for (int max_seq_tokens : {tk.max_len, 3 * tk.max_len}) {
      BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
      BEACON_CUDA_ASSERT_OK(LaunchPrefillAttention(p, dfirst.get(), dcount.get(), static_cast<int>(kSeqs.size()),
                                                   max_seq_tokens, nullptr));
      BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> got;
      BEACON_CUDA_ASSERT_OK(dout.Download(&got));
      ExpectBf16Near(got, want, kRtol, kAtol,
                     "prefill nq " + std::to_string(c.nq) + " nkv " + std::to_string(c.nkv) + " d " +
                         std::to_string(c.d) + " max_seq_tokens " + std::to_string(max_seq_tokens));
    }
  }
}

TEST(CudaPrefillAttentionTest, RejectsBadArguments) {
  BEACON_REQUIRE_CUDA_DEVICE();
  DeviceBuffer<uint16_t> buf(1024);
  DeviceBuffer<int32_t> ints(16);
  PagedAttentionParams good;
  good.q = reinterpret_cast<const __nv_bfloat16*>(buf.get());
  good.q_token_stride = 4 * 64;
  good.out = reinterpret_cast<__nv_bfloat16*>(buf.get());
  good.kv.k = good.kv.v = reinterpret_cast<__nv_bfloat16*>(buf.get());
  good.kv.layout = {kLayers, 2, 64, kBlockSize, 1};
  good.n_q_heads = 4;
  good.tables = {ints.get(), 1};
  good.tok_seq = good.tok_slot = ints.get();
  good.n_tokens = 1;
  const int32_t* a = ints.get();
  EXPECT_EQ(LaunchPrefillAttention(good, nullptr, a, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchPrefillAttention(good, a, nullptr, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchPrefillAttention(good, a, a, -1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchPrefillAttention(good, a, a, 1, -1, nullptr), cudaErrorInvalidValue);
  PagedAttentionParams p = good;
  p.kv.layout.n_kv_heads = 3;  // 4 query heads are not a multiple
  EXPECT_EQ(LaunchPrefillAttention(p, a, a, 1, 1, nullptr), cudaErrorInvalidValue);
  p = good;
  p.kv.layout.head_dim = 512;
  EXPECT_EQ(LaunchPrefillAttention(p, a, a, 1, 1, nullptr), cudaErrorInvalidValue);
  p = good;
  p.kv.k = reinterpret_cast<__nv_bfloat16*>(buf.get() + 1);  // not 16-byte aligned
  EXPECT_EQ(LaunchPrefillAttention(p, a, a, 1, 1, nullptr), cudaErrorInvalidValue);
  p = good;
  p.scale = NAN;
  EXPECT_EQ(LaunchPrefillAttention(p, a, a, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchPrefillAttention(good, a, a, 0, 1, nullptr), cudaSuccess);  // nothing to do
  EXPECT_EQ(LaunchPrefillAttention(good, a, a, 1, 0, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace prefill_attention_test
}  // namespace beacon
