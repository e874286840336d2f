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
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;
using namespace attention_test;  // NOLINT: the shared shapes, cache and reference

// Device copies of a HostCache plus the query/token arrays of one batch.
struct DeviceBatch {
  DeviceBuffer<uint16_t> k, v, q, out;
  DeviceBuffer<int32_t> table, seq, slot;
  DeviceBatch(const HostCache& hc, const std::vector<uint16_t>& hq, size_t out_elems, size_t tokens)
      : k(hc.k.size()),
        v(hc.v.size()),
        q(hq.size()),
        out(out_elems),
        table(hc.table.size()),
        seq(tokens),
        slot(tokens) {}
};

PagedAttentionParams MakeParams(const HostCache& hc, DeviceBatch& b, const Config& c, int64_t q_stride,
                                int64_t tokens) {
  PagedAttentionParams p;
  p.q = reinterpret_cast<const __nv_bfloat16*>(b.q.get());
  p.q_token_stride = q_stride;
  p.out = reinterpret_cast<__nv_bfloat16*>(b.out.get());
  p.kv.k = reinterpret_cast<__nv_bfloat16*>(b.k.get());
  p.kv.v = reinterpret_cast<__nv_bfloat16*>(b.v.get());
  p.kv.layout = hc.layout;
  p.layer = kLayer;
  p.n_q_heads = c.nq;
  p.tables = {b.table.get(), hc.stride};
  p.tok_seq = b.seq.get();
  p.tok_slot = b.slot.get();
  p.n_tokens = tokens;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  return p;
}

// kMma rounds each weight p to bf16 (relative error <= 2^-9) and divides by
// the sum of the rounded weights, which moves an output by at most
// 2 * 2^-9 * max |v| beyond the fp32 error that kAtol covers.
double AbsTolerance(DecodeAttentionKernel kernel, const HostCache& hc) {
  if (kernel != DecodeAttentionKernel::kMma) return kAtol;
  double max_v = 0;
  for (uint16_t v : hc.v) max_v = std::max(max_v, std::abs(static_cast<double>(Bf16ToFp32(v))));
  return kAtol + 2 * max_v / 512;
}

// Each config against the exact loop, on a ragged batch, at 1, 4 and 16 splits.
void ExpectMatchesNaiveLoop(DecodeAttentionKernel kernel, const std::vector<Config>& configs) {
  // Rows of 1, 17, 300, 3000 and 45 slots (3000 needs up to 12 partitions).
  const std::vector<int> seq_slots = {1, 17, 300, 3000, 45};
  // One token at the end of each row, plus tokens inside rows: partition
  // boundaries (255/256), one slot, the middle of the long row.
  const std::vector<int32_t> seq = {0, 1, 2, 3, 4, 3, 3, 2, 2, 1};
  const std::vector<int32_t> slot = {0, 16, 299, 2999, 44, 0, 1500, 255, 256, 3};
  const int64_t n = static_cast<int64_t>(seq.size());
  uint64_t seed = 7;
  for (const Config& c : configs) {
    const HostCache hc = MakeCache(c, seq_slots, seed++);
    const int64_t q_stride = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.d;  // a view into fused QKV
    const auto q = RandomBf16(n * q_stride, seed++, kQStddev);
    const size_t out_elems = n * c.nq * c.d;
    DeviceBatch b(hc, q, out_elems, n);
    BEACON_CUDA_ASSERT_OK(b.k.Upload(hc.k));
    BEACON_CUDA_ASSERT_OK(b.v.Upload(hc.v));
    BEACON_CUDA_ASSERT_OK(b.q.Upload(q));
    BEACON_CUDA_ASSERT_OK(b.table.Upload(hc.table));
    BEACON_CUDA_ASSERT_OK(b.seq.Upload(seq));
    BEACON_CUDA_ASSERT_OK(b.slot.Upload(slot));
    const PagedAttentionParams p = MakeParams(hc, b, c, q_stride, n);
    const std::vector<double> want = NaiveAttention(hc, q, q_stride, c.nq, seq, slot, p.scale);
    const double atol = AbsTolerance(kernel, hc);
    for (int max_splits : {1, 4, 16}) {
      DeviceBuffer<uint8_t> ws(DecodeAttentionWorkspaceBytes(n, c.nq, c.d, max_splits));
      BEACON_CUDA_ASSERT_OK(ws.PoisonWithNaN());
      BEACON_CUDA_ASSERT_OK(b.out.PoisonWithNaN());
      BEACON_CUDA_ASSERT_OK(LaunchDecodeAttention(p, max_splits, max_splits > 1 ? ws.get() : nullptr, nullptr, kernel));
      BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> got;
      BEACON_CUDA_ASSERT_OK(b.out.Download(&got));
      ExpectBf16Near(got, want, kRtol, atol,
                     "decode nq " + std::to_string(c.nq) + " nkv " + std::to_string(c.nkv) + " d " +
                         std::to_string(c.d) + " max_splits " + std::to_string(max_splits));
    }
  }
}

TEST(CudaDecodeAttentionTest, MatchesNaiveLoopForRaggedBatchesAndSplits) {
  BEACON_REQUIRE_CUDA_DEVICE();
  ExpectMatchesNaiveLoop(DecodeAttentionKernel::kSimt, {std::begin(kConfigs), std::end(kConfigs)});
}

// The tensor-core kernel on its head dims (64, 128): GQA groups 1, 2, 4, 6
// (Qwen2.5-1.5B), 7 (R1-Distill-Qwen-7B, 28 heads over 4), 8 and 20 (two
// chunks of 16 rows, the second partly empty). Rounding P to bf16 adds at
// most 2^-9 relative to each weight, inside the same tolerance.
TEST(CudaDecodeAttentionTest, TensorCoreKernelMatchesNaiveLoop) {
  BEACON_REQUIRE_CUDA_DEVICE();
  ExpectMatchesNaiveLoop(DecodeAttentionKernel::kMma,
                         {{4, 4, 64}, {8, 4, 64}, {8, 2, 128}, {12, 2, 128}, {28, 4, 128}, {16, 2, 64}, {40, 2, 64}});
}

// Other head dims run the CUDA-core kernel when the tensor-core one is asked.
TEST(CudaDecodeAttentionTest, TensorCoreRequestFallsBackOnOtherHeadDims) {
  BEACON_REQUIRE_CUDA_DEVICE();
  ExpectMatchesNaiveLoop(DecodeAttentionKernel::kMma, {{6, 2, 40}, {4, 2, 18}});
}

// The grid depends on (n_tokens, heads, max_splits) only, so one captured
// graph serves a growing context: rewrite tok_slot, replay, compare.
class CudaDecodeGraphTest : public testing::TestWithParam<DecodeAttentionKernel> {};

TEST_P(CudaDecodeGraphTest, CapturedGraphFollowsGrowingContexts) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const Config c = {32, 8, 128};  // Qwen3-4B attention shape
  const std::vector<int> seq_slots = {3000, 700};
  const std::vector<int32_t> seq = {0, 1};
  const int64_t n = 2, q_stride = c.nq * c.d;
  const int max_splits = 8;
  const HostCache hc = MakeCache(c, seq_slots, 99);
  const auto q = RandomBf16(n * q_stride, 100, kQStddev);
  DeviceBatch b(hc, q, n * c.nq * c.d, n);
  BEACON_CUDA_ASSERT_OK(b.k.Upload(hc.k));
  BEACON_CUDA_ASSERT_OK(b.v.Upload(hc.v));
  BEACON_CUDA_ASSERT_OK(b.q.Upload(q));
  BEACON_CUDA_ASSERT_OK(b.table.Upload(hc.table));
  BEACON_CUDA_ASSERT_OK(b.seq.Upload(seq));
  BEACON_CUDA_ASSERT_OK(b.slot.Upload(std::vector<int32_t>{0, 0}));
  DeviceBuffer<uint8_t> ws(DecodeAttentionWorkspaceBytes(n, c.nq, c.d, max_splits));
  const PagedAttentionParams p = MakeParams(hc, b, c, q_stride, n);

  cudaStream_t stream;
  BEACON_CUDA_ASSERT_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  BEACON_CUDA_ASSERT_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const cudaError_t launch = LaunchDecodeAttention(p, max_splits, ws.get(), stream, GetParam());
  BEACON_CUDA_ASSERT_OK(cudaStreamEndCapture(stream, &graph));
  BEACON_CUDA_ASSERT_OK(launch);
  cudaGraphExec_t exec;
  BEACON_CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<int32_t>& slot :
       {std::vector<int32_t>{0, 0}, {200, 699}, {1023, 64}, {2999, 255}, {1500, 256}}) {
    BEACON_CUDA_ASSERT_OK(b.slot.Upload(slot));
    BEACON_CUDA_ASSERT_OK(b.out.PoisonWithNaN());
    BEACON_CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream));
    BEACON_CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> got;
    BEACON_CUDA_ASSERT_OK(b.out.Download(&got));
    ExpectBf16Near(got, NaiveAttention(hc, q, q_stride, c.nq, seq, slot, p.scale), kRtol, AbsTolerance(GetParam(), hc),
                   "graph replay at slots " + std::to_string(slot[0]) + ", " + std::to_string(slot[1]));
  }
  BEACON_CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  BEACON_CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  BEACON_CUDA_ASSERT_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaDecodeGraphTest,
                         testing::Values(DecodeAttentionKernel::kSimt, DecodeAttentionKernel::kMma),
                         [](const testing::TestParamInfo<DecodeAttentionKernel>& info) {
                           return info.param == DecodeAttentionKernel::kMma ? std::string("Mma") : std::string("Simt");
                         });

// A pure host function: runs without a GPU.
TEST(CudaDecodeAttentionTest, WorkspaceBytesCoverPartials) {
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(0, 32, 128, 8), 0u);
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(4, 32, 128, 1), 0u);  // no split, no scratch
  for (int64_t n : {1, 3, 64}) {
    for (int splits : {2, 7, 32}) {
      const size_t need = static_cast<size_t>(n) * 32 * splits * (128 + 2) * sizeof(float);
      EXPECT_GE(DecodeAttentionWorkspaceBytes(n, 32, 128, splits), need);
      EXPECT_LE(DecodeAttentionWorkspaceBytes(n, 32, 128, splits), need + 3 * 256);
    }
  }
}

TEST(CudaDecodeAttentionTest, RejectsBadArguments) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const Config c = {8, 2, 64};
  const HostCache hc = MakeCache(c, {20}, 5);
  const auto q = RandomBf16(c.nq * c.d, 6);
  DeviceBatch b(hc, q, c.nq * c.d, 1);
  DeviceBuffer<uint8_t> ws(DecodeAttentionWorkspaceBytes(1, c.nq, c.d, 4));
  const PagedAttentionParams good = MakeParams(hc, b, c, c.nq * c.d, 1);
  EXPECT_EQ(LaunchDecodeAttention(good, 4, nullptr, nullptr), cudaErrorInvalidValue);  // needs workspace
  EXPECT_EQ(LaunchDecodeAttention(good, 0, ws.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchDecodeAttention(good, 2000, ws.get(), nullptr), cudaErrorInvalidValue);
  PagedAttentionParams p = good;
  p.n_q_heads = 7;  // not a multiple of n_kv_heads
  EXPECT_EQ(LaunchDecodeAttention(p, 1, nullptr, nullptr), cudaErrorInvalidValue);
  p = good;
  p.layer = kLayers;
  EXPECT_EQ(LaunchDecodeAttention(p, 1, nullptr, nullptr), cudaErrorInvalidValue);
  p = good;
  p.kv.layout.head_dim = 33;
  EXPECT_EQ(LaunchDecodeAttention(p, 1, nullptr, nullptr), cudaErrorInvalidValue);
  p = good;
  p.q_token_stride = c.nq * c.d - 1;
  EXPECT_EQ(LaunchDecodeAttention(p, 1, nullptr, nullptr), cudaErrorInvalidValue);
  p = good;
  p.tok_slot = nullptr;
  EXPECT_EQ(LaunchDecodeAttention(p, 1, nullptr, nullptr), cudaErrorInvalidValue);
  p = good;
  p.n_tokens = 0;
  EXPECT_EQ(LaunchDecodeAttention(p, 4, ws.get(), nullptr), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace beacon
