// BeaconKV on the CUDA backend end to end (query ring and FPS updates inside
// the step, scoring, selection and compaction at each eviction) against the
// CPU backend's BeaconKV on the same weights and inputs; and the errors of
// the Backend contract on the device. Every test skips without a GPU.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "kv/sequence_compressor.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

const std::string kModel = std::string("dummy:") + BEACON_SOURCE_DIR + "/tests/data/small-qwen3-hd128.json";

std::unique_ptr<Runtime> MakeRuntime(const std::string& device) {
  RuntimeOptions o;
  o.model = kModel;
  o.device = device;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
}

double RelRms(const float* got, const float* want, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

KvPolicyOptions SmallBeacon() {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor("beacon");
  o.budget = 48;
  o.interval = 16;
  o.window = 8;
  o.sinks = 4;
  o.recent_queries = 8;
  o.beacons = 8;
  o.fps_bound = 24;  // several FPS shrinks within the run
  return o;
}

// Teacher-forced decode under BeaconKV on both backends. Slot counts and
// eviction counts follow from the step count alone, so they must match
// exactly; logits after evictions differ by the bf16 arithmetic and by
// near-tied scores selecting different slots, so the test bounds the median
// row error (a device policy keeping the wrong slots, or none, gives errors
// of order 1 on most rows once the cache is a fraction of the history).
TEST(CudaBeaconTest, EvictionOnDeviceTracksCpu) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Runtime> cpu = MakeRuntime("cpu"), gpu = MakeRuntime("cuda");
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  const int vocab = cpu->config().vocab_size;
  const KvPolicyOptions o = SmallBeacon();
  const int32_t prompt_len = 24;
  auto cc = cpu->MakeKvCache(1024), gc = gpu->MakeKvCache(1024);
  SequenceKv cs(cc.get()), gs(gc.get());
  auto ccomp = SequenceCompressor::Create(o, PolicyInfoFor(cpu->config()), prompt_len);
  auto gcomp = SequenceCompressor::Create(o, PolicyInfoFor(gpu->config()), prompt_len);
  ASSERT_TRUE(ccomp.ok() && gcomp.ok());
  std::vector<int32_t> prompt(prompt_len);
  for (int i = 0; i < prompt_len; ++i) prompt[i] = (i * 37 + 11) % vocab;
  std::vector<float> cl, gl;
  ForwardEntry ce{&cs, prompt, 0, false, (*ccomp)->policy()}, ge{&gs, prompt, 0, false, (*gcomp)->policy()};
  ASSERT_TRUE(cpu->backend()->Forward(std::span(&ce, 1), &cl).ok());
  ASSERT_TRUE(gpu->backend()->Forward(std::span(&ge, 1), &gl).ok());
  std::vector<double> errors;
  std::vector<int32_t> next = {static_cast<int32_t>(std::max_element(cl.begin(), cl.end()) - cl.begin())};
  const int steps = 200;
  for (int s = 0; s < steps; ++s) {
    const int32_t pos = prompt_len + s;
    ForwardEntry cd{&cs, next, pos, false, (*ccomp)->policy()}, gd{&gs, next, pos, false, (*gcomp)->policy()};
    ASSERT_TRUE(cpu->backend()->Forward(std::span(&cd, 1), &cl).ok());
    gl.assign(cl.size(), std::nanf(""));
    ASSERT_TRUE(gpu->backend()->Forward(std::span(&gd, 1), &gl).ok()) << "step " << s;
    errors.push_back(RelRms(gl.data(), cl.data(), vocab));
    (*ccomp)->AfterDecodeStep(&cs, pos + 1);
    (*gcomp)->AfterDecodeStep(&gs, pos + 1);
    ASSERT_EQ(gs.num_slots(), cs.num_slots()) << "step " << s;
    next = {static_cast<int32_t>(std::max_element(cl.begin(), cl.end()) - cl.begin())};
  }
  EXPECT_EQ((*gcomp)->evictions(), (*ccomp)->evictions());
  EXPECT_GE((*gcomp)->evictions(), 8);
  EXPECT_LE(gs.peak_slots(), (*gcomp)->bound() + o.interval);
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::printf("beacon on device: %lld evictions, logits error median %.3g, max %.3g\n",
              static_cast<long long>((*gcomp)->evictions()), median, sorted.back());
  EXPECT_LE(median, 5e-2);
  cs.Release();
  gs.Release();
  EXPECT_EQ(gc->pool().num_free(), gc->pool().num_blocks());
}

TEST(CudaBeaconTest, BadInputsFailCleanlyAndLoseNothing) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::unique_ptr<Runtime> gpu = MakeRuntime("cuda");
  ASSERT_NE(gpu, nullptr);
  Backend* be = gpu->backend();
  const int vocab = gpu->config().vocab_size;
  auto cache = gpu->MakeKvCache(64);  // 4 blocks of 16
  SequenceKv a(cache.get());
  std::vector<float> logits;
  std::vector<int32_t> ok = {1, 2, 3};
  ForwardEntry e{&a, ok, 0, false};
  ASSERT_TRUE(be->Forward(std::span(&e, 1), &logits).ok());
  const int32_t free_before = cache->pool().num_free();

  std::vector<int32_t> bad = {4, vocab};
  ForwardEntry eb{&a, bad, 3, false};
  absl::Status s = be->Forward(std::span(&eb, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("vocabulary"), std::string_view::npos) << s;

  std::vector<int32_t> many(100, 5);
  ForwardEntry big{&a, many, 3, false};
  s = be->Forward(std::span(&big, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(a.num_slots(), 3);
  EXPECT_EQ(cache->pool().num_free(), free_before);

  // A host cache is not this backend's.
  KvCache host(cache->shape(), 4, KvStorage::kHost);
  SequenceKv h(&host);
  ForwardEntry eh{&h, ok, 0, false};
  s = be->Forward(std::span(&eh, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  // Policies the device cannot run are refused before they start.
  KvPolicyOptions snap = KvPolicyOptions::DefaultsFor("snapkv");
  EXPECT_EQ(be->CheckPolicy(snap).code(), absl::StatusCode::kUnimplemented);
  KvPolicyOptions global = KvPolicyOptions::DefaultsFor("beacon");
  global.beacon_filter = BeaconFilter::kGlobal;
  EXPECT_EQ(be->CheckPolicy(global).code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(be->CheckPolicy(KvPolicyOptions::DefaultsFor("beacon")).ok());
  auto comp = SequenceCompressor::Create(snap, PolicyInfoFor(gpu->config()), 3);
  ASSERT_TRUE(comp.ok());
  SequenceKv c(cache.get());
  ForwardEntry ec{&c, ok, 0, false, (*comp)->policy()};
  s = be->Forward(std::span(&ec, 1), &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_EQ(c.num_slots(), 0);

  // The sequence still works after all that.
  std::vector<int32_t> more = {7};
  ForwardEntry en{&a, more, 3, false};
  EXPECT_TRUE(be->Forward(std::span(&en, 1), &logits).ok());
  EXPECT_EQ(a.num_slots(), 4);
  a.Release();
  EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks());
}

}  // namespace
}  // namespace beacon
