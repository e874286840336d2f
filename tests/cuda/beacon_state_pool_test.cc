// BeaconStatePool (engine/cuda/beacon_state_pool.h) and its use: states are
// handed out zeroed, at most `capacity` at once, and come back when their
// policy goes; a policy with the pool's dims takes its state from the pool
// during a step (no allocation there), other dims get their own; the CUDA
// backend's reservation holds exactly capacity x the layout's bytes plus
// the eviction scratch, which every eviction of the server's dims uses.
#include "engine/cuda/beacon_state_pool.h"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/cuda/beacon_device_state.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_kv.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"
#include "tests/cuda/backend_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

BeaconDims Dims() {
  BeaconDims d;
  d.n_layers = 2;
  d.n_heads = 4;
  d.n_kv_heads = 2;
  d.head_dim = 16;
  d.recent = 4;
  d.beacons = 2;
  d.fps_bound = 8;
  return d;
}

TEST(BeaconStatePool, HandsOutZeroedStatesUpToItsCapacity) {
  BEACON_REQUIRE_CUDA_DEVICE();
  auto pool = BeaconStatePool::Create(Dims(), 2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->state_bytes(), BeaconStateLayout::For(Dims()).total_bytes);
  EXPECT_EQ((*pool)->num_free(), 2);
  auto a = (*pool)->Acquire(nullptr), b = (*pool)->Acquire(nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*b) % 256, 0u);
  auto c = (*pool)->Acquire(nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("all 2"), std::string::npos) << c.status();
  // A released state comes back zeroed, whatever its last holder wrote.
  const size_t n = (*pool)->state_bytes();
  BEACON_CUDA_ASSERT_OK(cudaMemset(*a, 0xAB, n));
  (*pool)->Release(*a);
  auto again = (*pool)->Acquire(nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a) << "the most recently released state comes first";
  BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> host(n, 0xFF);
  BEACON_CUDA_ASSERT_OK(cudaMemcpy(host.data(), *again, n, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::set<uint8_t>(host.begin(), host.end()), std::set<uint8_t>{0});
  (*pool)->Release(*again);
  (*pool)->Release(*b);
  EXPECT_EQ((*pool)->num_free(), 2);
}

TEST(BeaconStatePool, BadSizesAreRefused) {
  BEACON_REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(BeaconStatePool::Create(Dims(), 0).status().code(), absl::StatusCode::kInvalidArgument);
  BeaconDims bad = Dims();
  bad.fps_bound = bad.beacons;  // U must exceed K
  EXPECT_EQ(BeaconStatePool::Create(bad, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// On the backend: a reservation for the server's beacon options; a step
// takes a sequence's state from it, the state goes back with the policy
// (preemption and finish alike destroy the policy), and a policy of other
// dims allocates its own.
TEST(BeaconStatePool, StepsTakeStatesFromTheBackendsReservation) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const std::string model = std::string("dummy:") + BEACON_SOURCE_DIR + "/tests/data/small-qwen3-hd128.json";
  std::unique_ptr<Runtime> rt = backend_test::MakeRuntime(model, "cuda");
  ASSERT_NE(rt, nullptr);
  auto* cuda = dynamic_cast<CudaBackend*>(rt->backend());
  ASSERT_NE(cuda, nullptr);
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.budget = 48;
  o.interval = 16;
  ASSERT_TRUE(cuda->ReservePolicyStates(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), 3).ok());
  EXPECT_EQ(cuda->beacon_state_pool(), nullptr) << "full keeps no device state";
  ASSERT_TRUE(cuda->ReservePolicyStates(o, 3).ok());
  const PolicyModelInfo info = PolicyInfoFor(rt->config());
  ASSERT_NE(cuda->beacon_state_pool(), nullptr);
  // No pool yet: the scratch covers a sequence as long as the context.
  const BeaconDims dims = BeaconDimsFor(o, info);
  ASSERT_NE(cuda->evict_scratch(), nullptr);
  EXPECT_EQ(cuda->evict_scratch()->max_slots, rt->config().context_length);
  const size_t scratch = BeaconEvictScratchLayout::BytesForAtMost(dims, rt->config().context_length, 1);
  EXPECT_EQ(cuda->reserved_policy_state_bytes(), 3 * BeaconStateLayout::For(dims).total_bytes + scratch);

  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(512);
  const std::vector<int32_t> prompt = {3, 9, 27, 81, 5, 15};
  auto run = [&](const KvPolicyOptions& opts) {
    auto comp = SequenceCompressor::Create(opts, info, static_cast<int32_t>(prompt.size()));
    EXPECT_TRUE(comp.ok());
    SequenceKv seq(cache.get());
    std::vector<float> logits;
    ForwardEntry e{&seq, prompt, 0, false, (*comp)->policy()};
    EXPECT_TRUE(rt->backend()->Forward(std::span(&e, 1), &logits).ok());
    auto* state = dynamic_cast<BeaconDeviceState*>((*comp)->policy()->device_state());
    EXPECT_NE(state, nullptr);
    const bool pooled = state != nullptr && state->pooled();
    const int32_t free_during = cuda->beacon_state_pool()->num_free();
    seq.Release();
    return std::pair{pooled, free_during};
  };
  EXPECT_EQ(run(o), (std::pair{true, 2})) << "the server's dims: from the pool";
  EXPECT_EQ(cuda->beacon_state_pool()->num_free(), 3) << "back with the policy";
  KvPolicyOptions other = o;
  other.fps_bound = 96;
  EXPECT_EQ(run(other), (std::pair{false, 3})) << "other dims: their own allocation";
  EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks());
}

// Evictions inside steps use the scratch reserved at start-up, sized for
// the pool (min(context, pool slots)): none allocates; a policy of other
// dims, which the reservation does not cover, allocates its own once.
TEST(BeaconStatePool, EvictionsUseTheReservedScratch) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const std::string model = std::string("dummy:") + BEACON_SOURCE_DIR + "/tests/data/small-qwen3-hd128.json";
  std::unique_ptr<Runtime> rt = backend_test::MakeRuntime(model, "cuda");
  ASSERT_NE(rt, nullptr);
  auto* cuda = dynamic_cast<CudaBackend*>(rt->backend());
  ASSERT_NE(cuda, nullptr);
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.budget = 32;
  o.interval = 8;
  o.window = 8;
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(256);
  ASSERT_TRUE(cuda->ReservePolicyStates(o, 2).ok());
  const PolicyModelInfo info = PolicyInfoFor(rt->config());
  ASSERT_NE(cuda->evict_scratch(), nullptr);
  ASSERT_LT(256, rt->config().context_length) << "the pool must be the bound here";
  EXPECT_EQ(cuda->evict_scratch()->max_slots, 256) << "the pool, smaller than the context, bounds a sequence";
  EXPECT_EQ(cuda->evict_scratch()->memory.bytes(),
            BeaconEvictScratchLayout::BytesForAtMost(BeaconDimsFor(o, info), 256, cache->shape().block_size));
  auto* storage = dynamic_cast<DeviceKvStorage*>(cache->device_storage());
  ASSERT_NE(storage, nullptr);

  const std::vector<int32_t> prompt = {3, 9, 27, 81, 5, 15, 45, 7};
  auto decode = [&](const KvPolicyOptions& opts) {  // teacher-forced; returns its evictions
    auto comp = SequenceCompressor::Create(opts, info, static_cast<int32_t>(prompt.size()));
    EXPECT_TRUE(comp.ok());
    SequenceKv seq(cache.get());
    std::vector<float> logits;
    ForwardEntry e{&seq, prompt, 0, false, (*comp)->policy()};
    EXPECT_TRUE(rt->backend()->Forward(std::span(&e, 1), &logits).ok());
    for (int32_t pos = static_cast<int32_t>(prompt.size()); pos < 80; ++pos) {
      const std::vector<int32_t> token = {pos % 97 + 1};
      ForwardEntry d{&seq, token, pos, false, (*comp)->policy()};
      EXPECT_TRUE(rt->backend()->Forward(std::span(&d, 1), &logits).ok()) << "position " << pos;
      (*comp)->AfterDecodeStep(&seq, pos + 1);
      EXPECT_TRUE((*comp)->failure().ok()) << "position " << pos;
    }
    const int64_t evictions = (*comp)->evictions();
    seq.Release();
    return evictions;
  };
  EXPECT_GE(decode(o), 4);
  EXPECT_EQ(storage->own_scratch_allocations(), 0) << "every eviction used the reservation";
  KvPolicyOptions other = o;
  other.beacons = o.beacons + 4;  // other dims (K 12 with the defaults' U of 16)
  EXPECT_GE(decode(other), 4);
  EXPECT_EQ(storage->own_scratch_allocations(), 1) << "other dims: a scratch of its own, grown once";
  EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks());
}

}  // namespace
}  // namespace beacon
