// Self-test of the CUDA emulator: the checks it promises (README.md) fire on
// deliberately broken code, and correct code gives exact results in every
// scheduling order. Without this, a regression in the emulator would let the
// backend's tests pass while checking nothing.
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda_emu/emu_internal.h"
#include "tests/cuda_emu/selftest/selftest_kernels.h"

namespace emu_selftest {
namespace {

using emu::internal::Order;
using emu::internal::TakeFindings;

// True when exactly one finding was reported since the last call and it
// contains `needle`.
::testing::AssertionResult OneFinding(const std::string& needle) {
  const std::vector<std::string> f = TakeFindings();
  if (f.size() == 1 && f[0].find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure() << f.size() << " finding(s), wanted one with \"" << needle << "\":";
  for (const std::string& s : f) r << "\n  " << s;
  return r;
}

class EmuSelfTest : public ::testing::Test {
 protected:
  void SetUp() override { order_ = emu::internal::ScheduleOrder(); }
  void TearDown() override {
    emu::internal::SetScheduleOrder(order_);
    cudaDeviceSynchronize();
    const std::vector<std::string> left = TakeFindings();
    EXPECT_TRUE(left.empty()) << "unexpected finding: " << left[0];
  }
  template <class T>
  T* Device(size_t n) {
    T* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    buffers_.push_back(p);
    return p;
  }
  ~EmuSelfTest() override {
    for (void* p : buffers_) cudaFree(p);
  }
  std::vector<void*> buffers_;
  Order order_ = Order::kForward;  // EMU_ORDER's, restored after each test
};

TEST_F(EmuSelfTest, BarrierMakesSharedMemoryWritesVisibleInEveryOrder) {
  constexpr int kBlocks = 3;
  std::vector<float> in(kBlocks * kBlockThreads), out(kBlocks);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i / kBlockThreads + 1);
  float* d_in = Device<float>(in.size());
  float* d_out = Device<float>(kBlocks);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  auto sum_of_block = [&](int b) {
    float s = 0;
    for (int i = 0; i < kBlockThreads; ++i) s += in[b * kBlockThreads + i];
    return s;
  };
  for (const Order order : {Order::kForward, Order::kReverse, Order::kRandom}) {
    emu::internal::SetScheduleOrder(order);
    BlockSum(d_in, d_out, kBlocks, /*barrier=*/true, nullptr);
    ASSERT_EQ(cudaMemcpy(out.data(), d_out, kBlocks * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(out[b], sum_of_block(b)) << "order " << static_cast<int>(order);
  }
  // Without the barrier, thread 0 runs first in index order and sums slots
  // the other threads have not written yet (they still hold block 0's
  // values): the race shows as a wrong sum.
  emu::internal::SetScheduleOrder(Order::kForward);
  BlockSum(d_in, d_out, kBlocks, /*barrier=*/false, nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, kBlocks * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_NE(out[1], sum_of_block(1));
}

TEST_F(EmuSelfTest, WarpShuffleExchangesAcrossLanes) {
  std::vector<float> in(32), out(32);
  for (int i = 0; i < 32; ++i) in[i] = static_cast<float>(i);
  float* d_in = Device<float>(32);
  float* d_out = Device<float>(32);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), 128, cudaMemcpyHostToDevice), cudaSuccess);
  WarpSum(d_in, d_out, nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, 128, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 496.f) << "lane " << i;
}

// The warp matrix stand-in (fake/mma.h) multiplies exactly (small integers)
// and reports a pointer that the hardware would refuse.
TEST_F(EmuSelfTest, WmmaMultipliesAndChecksAlignment) {
  std::vector<uint16_t> a(32 * 16), b(16 * 16);  // a: 16 spare elements for the offset
  std::vector<float> fa(16 * 16), fb(16 * 16), c(16 * 16);
  for (int i = 0; i < 256; ++i) {
    fa[i] = static_cast<float>(i % 7 - 3);
    fb[i] = static_cast<float>(i % 5 - 2);
    a[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(fa[i]) >> 16);  // exact in bf16
    b[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(fb[i]) >> 16);
  }
  uint16_t* d_a = Device<uint16_t>(a.size());
  uint16_t* d_b = Device<uint16_t>(b.size());
  float* d_c = Device<float>(c.size());
  ASSERT_EQ(cudaMemcpy(d_a, a.data(), a.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_b, b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  WmmaProduct(d_a, d_b, d_c, 0, nullptr);
  ASSERT_EQ(cudaMemcpy(c.data(), d_c, c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int r = 0; r < 16; ++r) {
    for (int col = 0; col < 16; ++col) {
      float want = 0;
      for (int k = 0; k < 16; ++k) want += fa[r * 16 + k] * fb[col * 16 + k];  // b column-major
      EXPECT_EQ(c[r * 16 + col], want) << r << "," << col;
    }
  }
  WmmaProduct(d_a, d_b, d_c, 8, nullptr);  // 16 bytes off
  EXPECT_TRUE(OneFinding("not 256-bit aligned"));
}

TEST_F(EmuSelfTest, FreshDeviceMemoryAndUnwaitedCopiesReadAsNaN) {
  float* d = Device<float>(kBlockThreads);
  float h = 0;
  ASSERT_EQ(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::isnan(h));
  std::vector<float> in(kBlockThreads, 2.f), out(kBlockThreads);
  float* d_in = Device<float>(kBlockThreads);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  PipelinedCopy(d_in, d, /*read_early=*/false, nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), d, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[5], 2.f);
  if (const char* p = std::getenv("EMU_PIPELINE"); p != nullptr && std::string(p) == "eager") return;
  PipelinedCopy(d_in, d, /*read_early=*/true, nullptr);
  ASSERT_EQ(cudaMemcpy(out.data(), d, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::isnan(out[5])) << "a cp.async destination read before the wait";
}

TEST_F(EmuSelfTest, LargeDynamicSharedMemoryNeedsTheAttribute) {
  constexpr int kN = 16384;  // 64 KiB
  std::vector<float> in(kN), out(kN);
  for (int i = 0; i < kN; ++i) in[i] = static_cast<float>(i);
  float* d_in = Device<float>(kN);
  float* d_out = Device<float>(kN);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), kN * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(CopyViaSharedMemory(d_in, d_out, kN, kN * 4, /*set_attribute=*/false, nullptr), cudaErrorInvalidValue);
  EXPECT_TRUE(OneFinding("without cudaFuncSetAttribute"));
  ASSERT_EQ(CopyViaSharedMemory(d_in, d_out, kN, kN * 4, /*set_attribute=*/true, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, kN * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, in);
}

TEST_F(EmuSelfTest, GraphsReplayTheArgumentsOfTheCapture) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* d = Device<float>(4);
  const std::vector<float> ones(4, 1.f);
  ASSERT_EQ(cudaMemcpyAsync(d, ones.data(), 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  float factor = 3.f;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  Scale(d, 4, factor, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  factor = 100.f;  // the capture holds the value at the launch
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  float h = 0;
  ASSERT_EQ(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 1.f) << "a captured launch ran before cudaGraphLaunch";
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 9.f);
  // A synchronous allocation during capture is refused and ruins the capture.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t bad = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &bad), cudaErrorStreamCaptureInvalidated);
  EXPECT_TRUE(OneFinding("during stream capture"));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// Programmatic dependent launch: a kernel that may start before the previous
// one finished must wait for it (cudaGridDependencySynchronize) in every
// thread; one that does runs as any launch, also captured and replayed.
TEST_F(EmuSelfTest, ProgrammaticLaunchWithoutTheGridWaitIsReported) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  constexpr int kN = 2 * kBlockThreads + 5;
  float* d = Device<float>(kN);
  const std::vector<float> ones(kN, 1.f);
  ASSERT_EQ(cudaMemcpyAsync(d, ones.data(), kN * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  EXPECT_EQ(ScaleLaunchEx(d, kN, 2.f, /*programmatic=*/true, /*wait=*/true, s), cudaSuccess);
  EXPECT_TRUE(TakeFindings().empty());
  EXPECT_EQ(ScaleLaunchEx(d, kN, 3.f, /*programmatic=*/false, /*wait=*/false, s), cudaSuccess);
  EXPECT_TRUE(TakeFindings().empty()) << "a plain launch need not wait";
  EXPECT_EQ(ScaleLaunchEx(d, kN, 5.f, /*programmatic=*/true, /*wait=*/false, s), cudaSuccess);
  EXPECT_TRUE(OneFinding("without cudaGridDependencySynchronize in a programmatic launch"));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(ScaleLaunchEx(d, kN, 7.f, /*programmatic=*/true, /*wait=*/true, s), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  std::vector<float> out(kN);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d, kN * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out, std::vector<float>(kN, 2.f * 3 * 5 * 7));
  EXPECT_TRUE(TakeFindings().empty());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST_F(EmuSelfTest, LegacyStreamWorkThenNonBlockingStreamIsAnOrderError) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* d = Device<float>(kBlockThreads);
  ASSERT_EQ(cudaMemset(d, 0, kBlockThreads * 4), cudaSuccess);  // may still run when it returns
  Scale(d, kBlockThreads, 2.f, s);
  EXPECT_TRUE(OneFinding("stream order"));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, kBlockThreads * 4), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Scale(d, kBlockThreads, 2.f, s);  // ordered: nothing to report
  EXPECT_TRUE(TakeFindings().empty());
  cudaStreamDestroy(s);
}

TEST_F(EmuSelfTest, HostPointersAndBadCopiesAreReported) {
  std::vector<float> host(kBlockThreads, 1.f);
  Scale(host.data(), kBlockThreads, 2.f, nullptr);
  EXPECT_TRUE(OneFinding("HOST address"));
  float* d = Device<float>(kBlockThreads);
  EXPECT_EQ(cudaMemcpy(d, d, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_TRUE(OneFinding("HostToDevice"));
  EXPECT_EQ(cudaMemcpy(d, host.data(), kBlockThreads * 4 + 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_TRUE(OneFinding("past the end"));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

using EmuSelfDeathTest = EmuSelfTest;

TEST_F(EmuSelfDeathTest, OverrunAndUseAfterFreeFault) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 100 * sizeof(float)), cudaSuccess);
  volatile float* v = d;
  EXPECT_DEATH(v[128] = 1.f, "");  // the first float past the 256-byte granules: the guard page
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_DEATH(v[0] = 1.f, "");
}

TEST_F(EmuSelfDeathTest, DeadlockAborts) { EXPECT_DEATH(Deadlock(), "deadlock"); }

}  // namespace
}  // namespace emu_selftest
