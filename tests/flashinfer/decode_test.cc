// FlashInfer's batch decode (kernels/flashinfer/decode.h) against the exact
// attention loop the decode kernels' tests use (tests/cuda/
// paged_attention_test_util.h), on our paged cache in place. GPU only: the
// emulator cannot run FlashInfer's PTX (cp.async, griddepcontrol), so these
// run where cuda_tests has a device (tools/gpu-check.sh) and skip elsewhere;
// the host-side checks at the end run everywhere cuda_tests builds.
#include "kernels/flashinfer/decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/paged_attention_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;
using namespace attention_test;  // NOLINT: the shared shapes, cache and reference

// The CSR pages of decode token b = sequence b (row b of the table), which
// attends to slots [0, slot[b]].
struct HostPages {
  std::vector<int32_t> indptr{0}, indices, last_page_len;
};

HostPages PagesOf(const HostCache& hc, const std::vector<int32_t>& slot) {
  HostPages p;
  const int bs = hc.layout.block_size;
  for (size_t b = 0; b < slot.size(); ++b) {
    const int32_t len = slot[b] + 1, pages = (len + bs - 1) / bs;
    for (int32_t i = 0; i < pages; ++i) p.indices.push_back(hc.table[b * hc.stride + i]);
    p.indptr.push_back(static_cast<int32_t>(p.indices.size()));
    p.last_page_len.push_back(len - (pages - 1) * bs);
  }
  return p;
}

// Pinned host and device workspaces for plans of up to max_batch sequences.
struct WorkspaceBytes {
  size_t f = 0, i = 0;
  WorkspaceBytes(FlashInferKernel kernel, int max_batch, const Config& c) {
    EXPECT_EQ(FlashInferDecodeWorkspaceBytes(kernel, max_batch, c.nq, c.nkv, c.d, kBlockSize, &f, &i), cudaSuccess);
  }
};
struct Workspace {
  WorkspaceBytes bytes;
  DeviceBuffer<uint8_t> float_dev, int_dev;
  void* int_host = nullptr;
  FlashInferDecodeWorkspace ws;
  Workspace(FlashInferKernel kernel, int max_batch, const Config& c)
      : bytes(kernel, max_batch, c), float_dev(bytes.f), int_dev(bytes.i) {
    EXPECT_EQ(cudaMallocHost(&int_host, bytes.i), cudaSuccess);
    ws = {float_dev.get(), bytes.f, int_dev.get(), int_host, bytes.i};
  }
  ~Workspace() { cudaFreeHost(int_host); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

// FlashInfer's split path stores each chunk's partial output in bf16 before
// the merge, and its tensor-core kernel rounds P to bf16 (as our kMma): up
// to 2^-9 relative each, so the same bound as our tensor-core kernel's
// test, 2 * 2^-9 * max |v| over kAtol.
double Tolerance(const HostCache& hc) {
  double max_v = 0;
  for (uint16_t v : hc.v) max_v = std::max(max_v, std::abs(static_cast<double>(Bf16ToFp32(v))));
  return kAtol + 2 * max_v / 512;
}

// Decode of one token per sequence at slots `slot` (sequence b's cache has
// seq_slots[b] >= slot[b] + 1 slots), planned, launched, compared. Returns
// whether the plan split sequences into chunks.
bool ExpectMatchesNaiveLoop(FlashInferKernel kernel, const Config& c, const std::vector<int>& seq_slots,
                            const std::vector<int32_t>& slot, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(slot.size());
  const HostCache hc = MakeCache(c, seq_slots, seed);
  const int64_t q_stride = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.d;  // a view into fused QKV
  const auto q = RandomBf16(n * q_stride, seed + 10, kQStddev);
  const HostPages hp = PagesOf(hc, slot);
  DeviceBuffer<uint16_t> k(hc.k.size()), v(hc.v.size()), dq(q.size()), out(n * c.nq * c.d);
  DeviceBuffer<int32_t> indptr(hp.indptr.size()), indices(std::max<size_t>(hp.indices.size(), 1)),
      last(hp.last_page_len.size()), qo(n + 1);
  std::vector<int32_t> rows(n + 1);
  for (int64_t b = 0; b <= n; ++b) rows[b] = static_cast<int32_t>(b);
  EXPECT_EQ(qo.Upload(rows), cudaSuccess);
  rows.pop_back();  // token b reads row b
  EXPECT_EQ(k.Upload(hc.k), cudaSuccess);
  EXPECT_EQ(v.Upload(hc.v), cudaSuccess);
  EXPECT_EQ(dq.Upload(q), cudaSuccess);
  EXPECT_EQ(indptr.Upload(hp.indptr), cudaSuccess);
  EXPECT_EQ(indices.Upload(hp.indices), cudaSuccess);
  EXPECT_EQ(last.Upload(hp.last_page_len), cudaSuccess);
  // The table and token arrays are not read (the pages say the same);
  // PagedAttentionParamsValid wants them non-null.
  DeviceBuffer<int32_t> table(hc.table.size()), seq(n), dslot(n);
  const PagedAttentionParams p =
      ParamsOver(hc, c, k.get(), v.get(), dq.get(), q_stride, out.get(), table.get(), seq.get(), dslot.get(), n);

  Workspace w(kernel, static_cast<int>(n), c);
  FlashInferDecodePlan plan;
  std::vector<uint16_t> got;
  auto run = [&] {
    BEACON_CUDA_ASSERT_OK(FlashInferDecodePlanStep(kernel, hp.indptr.data(), static_cast<int>(n), c.nq, c.nkv, c.d,
                                                   kBlockSize, w.ws, &plan, nullptr));
    BEACON_CUDA_ASSERT_OK(out.PoisonWithNaN());
    BEACON_CUDA_ASSERT_OK(
        LaunchFlashInferDecode(p, {indptr.get(), indices.get(), last.get(), qo.get()}, plan, w.ws, nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    BEACON_CUDA_ASSERT_OK(out.Download(&got));
  };
  run();
  if (got.empty()) return plan.split_kv();  // a failed CUDA call, reported above
  ExpectBf16Near(got, NaiveAttention(hc, q, q_stride, c.nq, rows, slot, p.scale), kRtol, Tolerance(hc),
                 std::string(kernel == FlashInferKernel::kTensorCores ? "flashinfer tensor cores" : "flashinfer") +
                     " nq " + std::to_string(c.nq) + " nkv " + std::to_string(c.nkv) + " d " + std::to_string(c.d) +
                     " batch " + std::to_string(n) + (plan.split_kv() ? " (split)" : " (whole sequences)"));
  return plan.split_kv();
}

class FlashInferKernelTest : public testing::TestWithParam<FlashInferKernel> {};

// Ragged lengths at the page edges (1, 16, 17 slots), long rows that split
// into chunks, and a slot inside a row (the cache holds more than is read).
// GQA 4 (Qwen3-4B 32/8 and 8/2), 6 (Qwen2.5-1.5B 12/2), 2, 1 and 16 on
// both kernels; 7 (R1-Distill-Qwen-7B 28/4) and 5 on the tensor cores, the
// only one whose dispatch has them.
TEST_P(FlashInferKernelTest, MatchesNaiveLoopOnRaggedBatches) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const std::vector<int> seq_slots = {1, 17, 300, 3000, 45, 16, 2048};
  const std::vector<int32_t> slot = {0, 16, 299, 2999, 44, 15, 1000};
  std::vector<Config> configs = {{32, 8, 128}, {8, 2, 128}, {12, 2, 128}, {8, 4, 64}, {4, 4, 64}, {16, 1, 64}};
  if (GetParam() == FlashInferKernel::kTensorCores) configs.insert(configs.end(), {{28, 4, 128}, {20, 4, 64}});
  uint64_t seed = 3;
  for (const Config& c : configs) {
    ExpectMatchesNaiveLoop(GetParam(), c, seq_slots, slot, seed);
    seed += 20;
  }
}

// Batch 1 (all SMs on one sequence's chunks) and a batch of 400. The
// CUDA-core kernel splits only while batch x KV heads < its grid (occupancy
// x SMs, at most 16 blocks of 128 threads an SM: 2,112 on a 132-SM H100 or
// H200), and 400 x 8 is 3,200: there it runs whole sequences, without the
// split and merge.
TEST_P(FlashInferKernelTest, MatchesNaiveLoopFromBatchOneToLargeBatches) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const Config c = {32, 8, 128};
  const bool split_one = ExpectMatchesNaiveLoop(GetParam(), c, {4096}, {4095}, 71);
  std::mt19937 rng(5);
  std::vector<int> seq_slots(400);
  std::vector<int32_t> slot(400);
  for (size_t b = 0; b < slot.size(); ++b) {
    seq_slots[b] = 1 + static_cast<int>(rng() % 300);
    slot[b] = seq_slots[b] - 1;
  }
  const bool split_many = ExpectMatchesNaiveLoop(GetParam(), c, seq_slots, slot, 72);
  if (GetParam() == FlashInferKernel::kCudaCores) {
    EXPECT_TRUE(split_one) << "batch 1 is split over the SMs";
    EXPECT_FALSE(split_many) << "batch 400 runs whole sequences";
  }
}

// One captured launch serves every later plan of the same batch: re-plan
// (new lengths, so new chunks and chunk size), replay, compare, as the
// backend does each decode step.
TEST_P(FlashInferKernelTest, CapturedGraphFollowsNewPlans) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const Config c = {32, 8, 128};
  const std::vector<int> seq_slots = {3000, 700};
  const int n = 2;
  const int64_t q_stride = c.nq * c.d;
  const HostCache hc = MakeCache(c, seq_slots, 99);
  const auto q = RandomBf16(n * q_stride, 100, kQStddev);
  // Device pages at capacity: indices never exceed the rows' blocks.
  const int max_pages = (3000 + kBlockSize - 1) / kBlockSize + (700 + kBlockSize - 1) / kBlockSize;
  DeviceBuffer<uint16_t> k(hc.k.size()), v(hc.v.size()), dq(q.size()), out(n * c.nq * c.d);
  DeviceBuffer<int32_t> indptr(n + 1), indices(max_pages), last(n), table(hc.table.size()), seq(n), dslot(n), qo(n + 1);
  BEACON_CUDA_ASSERT_OK(qo.Upload({0, 1, 2}));
  BEACON_CUDA_ASSERT_OK(k.Upload(hc.k));
  BEACON_CUDA_ASSERT_OK(v.Upload(hc.v));
  BEACON_CUDA_ASSERT_OK(dq.Upload(q));
  const PagedAttentionParams p =
      ParamsOver(hc, c, k.get(), v.get(), dq.get(), q_stride, out.get(), table.get(), seq.get(), dslot.get(), n);
  Workspace w(GetParam(), n, c);
  cudaStream_t stream;
  BEACON_CUDA_ASSERT_OK(cudaStreamCreate(&stream));
  auto plan_for = [&](const std::vector<int32_t>& slot, FlashInferDecodePlan* plan) {
    const HostPages hp = PagesOf(hc, slot);
    EXPECT_EQ(indptr.Upload(hp.indptr), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(indices.get(), hp.indices.data(), hp.indices.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    EXPECT_EQ(last.Upload(hp.last_page_len), cudaSuccess);
    EXPECT_EQ(
        FlashInferDecodePlanStep(GetParam(), hp.indptr.data(), n, c.nq, c.nkv, c.d, kBlockSize, w.ws, plan, stream),
        cudaSuccess);
  };
  FlashInferDecodePlan first;
  plan_for({0, 0}, &first);
  cudaGraph_t graph;
  BEACON_CUDA_ASSERT_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const cudaError_t launch =
      LaunchFlashInferDecode(p, {indptr.get(), indices.get(), last.get(), qo.get()}, first, w.ws, stream);
  BEACON_CUDA_ASSERT_OK(cudaStreamEndCapture(stream, &graph));
  BEACON_CUDA_ASSERT_OK(launch);
  cudaGraphExec_t exec;
  BEACON_CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<int32_t>& slot :
       {std::vector<int32_t>{0, 0}, {200, 699}, {1023, 64}, {2999, 255}, {1500, 256}}) {
    FlashInferDecodePlan plan;
    plan_for(slot, &plan);
    // The grid and the workspace layout are the batch's, whatever the lengths.
    EXPECT_EQ(plan.n, first.n);
    EXPECT_EQ(plan.padded_batch_size(), first.padded_batch_size());
    EXPECT_EQ(plan.split_kv(), first.split_kv());
    if (first.split_kv()) {
      for (int i = 0; i < first.n; ++i) EXPECT_EQ(plan.v[i], first.v[i]) << "plan entry " << i;
    }
    BEACON_CUDA_ASSERT_OK(out.PoisonWithNaN());
    BEACON_CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream));
    BEACON_CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> got;
    BEACON_CUDA_ASSERT_OK(out.Download(&got));
    ExpectBf16Near(got, NaiveAttention(hc, q, q_stride, c.nq, {0, 1}, slot, p.scale), kRtol, Tolerance(hc),
                   "graph replay at slots " + std::to_string(slot[0]) + ", " + std::to_string(slot[1]));
  }
  BEACON_CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  BEACON_CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  BEACON_CUDA_ASSERT_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Kernels, FlashInferKernelTest,
                         testing::Values(FlashInferKernel::kCudaCores, FlashInferKernel::kTensorCores),
                         [](const testing::TestParamInfo<FlashInferKernel>& info) {
                           return info.param == FlashInferKernel::kTensorCores ? std::string("TensorCores")
                                                                               : std::string("CudaCores");
                         });

// Host-only: the shapes each kernel covers, and refusals before any CUDA
// call.
TEST(FlashInferDecodeTest, SupportsItsGroupsAndHeadDims) {
  constexpr FlashInferKernel kCuda = FlashInferKernel::kCudaCores, kTensor = FlashInferKernel::kTensorCores;
  for (int g : {1, 2, 3, 4, 6, 8, 16}) EXPECT_TRUE(FlashInferDecodeSupports(kCuda, 4 * g, 4, 128)) << g;
  for (int g = 1; g <= 16; ++g) EXPECT_TRUE(FlashInferDecodeSupports(kTensor, 4 * g, 4, 128)) << g;
  EXPECT_TRUE(FlashInferDecodeSupports(kCuda, 32, 8, 64));
  EXPECT_FALSE(FlashInferDecodeSupports(kCuda, 28, 4, 128));  // R1-Distill-Qwen-7B: group 7
  EXPECT_TRUE(FlashInferDecodeSupports(kTensor, 28, 4, 128));
  EXPECT_FALSE(FlashInferDecodeSupports(kCuda, 20, 4, 128));    // group 5
  EXPECT_FALSE(FlashInferDecodeSupports(kTensor, 68, 4, 128));  // group 17: more than the tile's rows
  for (FlashInferKernel k : {kCuda, kTensor}) {
    EXPECT_FALSE(FlashInferDecodeSupports(k, 32, 8, 96));
    EXPECT_FALSE(FlashInferDecodeSupports(k, 32, 8, 256));
    EXPECT_FALSE(FlashInferDecodeSupports(k, 30, 8, 128));  // not a multiple
    EXPECT_FALSE(FlashInferDecodeSupports(k, 8, 0, 128));
  }
}

TEST(FlashInferDecodeTest, RejectsBadArgumentsBeforeAnyCudaCall) {
  for (FlashInferKernel k : {FlashInferKernel::kCudaCores, FlashInferKernel::kTensorCores}) {
    size_t fb = 0, ib = 0;
    EXPECT_EQ(FlashInferDecodeWorkspaceBytes(k, 0, 32, 8, 128, 16, &fb, &ib), cudaErrorInvalidValue);
    EXPECT_EQ(FlashInferDecodeWorkspaceBytes(k, 4, 32, 8, 96, 16, &fb, &ib), cudaErrorInvalidValue);
    const int32_t indptr[2] = {0, 1};
    FlashInferDecodePlan plan;
    EXPECT_EQ(FlashInferDecodePlanStep(k, indptr, 1, 32, 8, 128, 16, FlashInferDecodeWorkspace{}, &plan, nullptr),
              cudaErrorInvalidValue);  // no workspace
    PagedAttentionParams p;            // null pointers everywhere
    EXPECT_EQ(LaunchFlashInferDecode(p, {}, plan, FlashInferDecodeWorkspace{}, nullptr), cudaErrorInvalidValue);
  }
}

}  // namespace
}  // namespace beacon
