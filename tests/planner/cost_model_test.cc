// The roofline cost model on hand-computed cases, model sizes against the
// published parameter counts, and the GPU profile files.
#include "planner/cost_model.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "planner/gpu_profile.h"
#include "tests/planner/planner_test_util.h"

namespace beacon::planner {
namespace {

using test::ShippedModel;
using test::ToyGpu;
using test::ToyModel;

TEST(ModelCost, ParameterCountsMatchThePublishedModels) {
  // HF model cards: Qwen3-4B 4.02B (tied), Llama-3.1-8B 8.03B, Qwen2.5-7B
  // (R1-Distill-Qwen-7B) 7.62B, SmolLM2-135M 134.5M: exact counts.
  EXPECT_EQ(ShippedModel("qwen3-4b.json").params_total, 4'022'468'096);
  EXPECT_EQ(ShippedModel("llama-3.1-8b.json").params_total, 8'030'261'248);
  EXPECT_EQ(ShippedModel("deepseek-r1-distill-qwen-7b.json").params_total, 7'615'616'512);
  EXPECT_EQ(ShippedModel("smollm2-135m.json").params_total, 134'515'008);
}

// The CUDA engine's per-sequence BeaconKV state at Qwen3-4B's shape (36
// layers, 32 query heads of 128) with the defaults R = 4, K = 8, U = 16
// (issue 45), written out region by region (every region 256-byte aligned;
// the ring and FPS points are bf16 since issue 19):
//   ring 36*4*32*128*2 + ring_pos 36*4*4 (576, padded to 768)
//   + fps_pts 36*32*16*128*2 + fps_inv 36*32*16*8 + fps_tag 36*32*16*4
//   + fps_size 36*32*4.
TEST(PolicyState, BeaconDeviceStateAtQwen3Shape) {
  const ModelCost q = ShippedModel("qwen3-4b.json");
  const KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  ASSERT_EQ(beacon.recent_queries, 4);
  ASSERT_EQ(beacon.beacons, 8);
  ASSERT_EQ(beacon.fps_bound, 16);
  const double want = 1'179'648.0 + 768 + 4'718'592 + 147'456 + 73'728 + 4'608;
  EXPECT_DOUBLE_EQ(PolicyStateBytesPerSequence(beacon, q), want);  // 6.1 MB
  // The defaults before issue 45, R = K = 16, U = 64: 24.5 MB (issue 19 found 48 MB in f32).
  KvPolicyOptions before = beacon;
  before.recent_queries = 16, before.beacons = 16, before.fps_bound = 64;
  EXPECT_DOUBLE_EQ(PolicyStateBytesPerSequence(before, q),
                   4'718'592.0 + 2'304 + 18'874'368 + 589'824 + 294'912 + 4'608);
  KvPolicyOptions bigger = beacon;
  bigger.fps_bound = 128;
  EXPECT_GT(PolicyStateBytesPerSequence(bigger, q), want) << "the FPS buffers grow with U";
  // Group-shared state: the 8 KV heads' regions instead of the 32 query
  // heads' (fps_size, 1,152 bytes, padded to 1,280).
  KvPolicyOptions grouped = beacon;
  grouped.beacon_group_queries = true;
  EXPECT_DOUBLE_EQ(PolicyStateBytesPerSequence(grouped, q),
                   294'912.0 + 768 + 1'179'648 + 36'864 + 18'432 + 1'280);  // 1.5 MB
  for (KvPolicyKind k : {KvPolicyKind::kFull, KvPolicyKind::kSnapKv, KvPolicyKind::kH2o, KvPolicyKind::kRkv}) {
    EXPECT_EQ(PolicyStateBytesPerSequence(KvPolicyOptions::DefaultsFor(k), q), 0) << KvPolicyName(k);
  }
}

TEST(ModelCost, KvBytesPerTokenAndWeightBytes) {
  const ModelCost q = ShippedModel("qwen3-4b.json");
  EXPECT_EQ(q.kv_bytes_per_token(), 2.0 * 36 * 8 * 128 * 2);  // 147,456 B = 144 KiB
  EXPECT_DOUBLE_EQ(q.weight_bytes(), 4'022'468'096.0 * 2);
  EXPECT_DOUBLE_EQ(q.weight_bytes_read(), q.weight_bytes());  // tied: the table is read as the LM head
  const ModelCost l = ShippedModel("llama-3.1-8b.json");
  EXPECT_EQ(l.kv_bytes_per_token(), 2.0 * 32 * 8 * 128 * 2);
  // Untied: the input embedding is gathered, not read.
  EXPECT_DOUBLE_EQ(l.weight_bytes() - l.weight_bytes_read(), 128256.0 * 4096 * 2);
  const ModelCost d = ShippedModel("deepseek-r1-distill-qwen-7b.json");
  EXPECT_EQ(d.kv_bytes_per_token(), 2.0 * 28 * 4 * 128 * 2);
  // fp8 KV halves it.
  absl::StatusOr<ModelConfig> c = ParseHfConfigFile(test::Src("configs/qwen3-4b.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ModelCostFromConfig(*c, 2, 1).kv_bytes_per_token(), 36 * 8 * 128 * 2);
}

TEST(CostModel, DecodeStepIsBandwidthBound) {
  const CostModel m(ToyModel(), ToyGpu(), PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull)));
  // Two decoding sequences holding 10 and 20 slots.
  StepLoad load;
  load.tokens = 2;
  load.sampled = 2;
  load.kv_read_slots = 11 + 21;
  load.kv_write_slots = 2;
  load.attn_pairs = 11 + 21;
  const StepCost c = m.Step(load);
  // Bytes: weights 1,200 x 2 + (32 read + 2 written) x 128 B per token.
  EXPECT_DOUBLE_EQ(c.bytes, 2400 + 34 * 128);
  // FLOPs: 2 x 1,000 per token + 2 x 100 (LM head) per sampled + 4 x 8 x 4 heads x 2 layers per pair.
  EXPECT_DOUBLE_EQ(c.flops, 2 * 1000 * 2 + 2 * 100 * 2 + 4 * 8 * 4 * 2 * 32);
  EXPECT_DOUBLE_EQ(c.memory_s, 6752e-12);
  EXPECT_DOUBLE_EQ(c.compute_s, 12592e-15);
  EXPECT_FALSE(c.compute_bound());
  EXPECT_DOUBLE_EQ(c.total_s, 6752e-12);
}

TEST(CostModel, FixedOverheadIsHostPlusLaunchesPerLayer) {
  GpuProfile g = ToyGpu();
  g.step_host_overhead_s = 1e-4;
  g.launch_overhead_s = 2e-6;
  g.kernels_per_layer = 10;
  const CostModel m(ToyModel(), g, PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull)));
  StepLoad load;
  load.tokens = load.sampled = load.kv_read_slots = load.kv_write_slots = load.attn_pairs = 1;
  const StepCost c = m.Step(load);
  EXPECT_DOUBLE_EQ(c.overhead_s, 1e-4 + 2 * 10 * 2e-6);
  EXPECT_DOUBLE_EQ(c.total_s, c.memory_s + 1.4e-4);
  EXPECT_DOUBLE_EQ(m.Step(StepLoad{}).total_s, 0);  // no work, no step
}

TEST(CostModel, PrefillChunkIsComputeBoundOnASlowMatrixUnit) {
  GpuProfile g = ToyGpu();
  g.bf16_flops = 1e9;
  const CostModel m(ToyModel(), g, PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull)));
  // A 100-token first chunk: causal pairs 100 x 101 / 2; only its last token is sampled.
  StepLoad load;
  load.tokens = 100;
  load.sampled = 1;
  load.kv_read_slots = 100;
  load.kv_write_slots = 100;
  load.attn_pairs = 5050;
  const StepCost c = m.Step(load);
  EXPECT_DOUBLE_EQ(c.flops, 2 * 1000 * 100 + 2 * 100 + 256 * 5050);
  EXPECT_DOUBLE_EQ(c.bytes, 2400 + 200 * 128);
  EXPECT_TRUE(c.compute_bound());
  EXPECT_DOUBLE_EQ(c.total_s, 1493000e-9);
}

TEST(CostModel, EvictionScoresReadsKeysAndCompactsKeptSlots) {
  GpuProfile g = ToyGpu();
  g.launch_overhead_s = 1e-6;
  g.evict_kernels_per_layer = 6;
  const CostModel beacon(ToyModel(), g, PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon)));
  StepLoad load;
  load.evictions = 1;
  load.evict_scored_slots = 100;
  load.evict_kept_slots = 50;
  load.evict_scored_sq = 100.0 * 100;
  const StepCost c = beacon.Step(load);
  // K half of 100 slots read; 50 kept slots' K/V read and written.
  EXPECT_DOUBLE_EQ(c.evict_bytes, 100 * 128 / 2 + 2 * 50 * 128);
  // (2 d + 5) x query heads x layers x (4 recent + 8 beacons) x slots.
  EXPECT_DOUBLE_EQ(c.evict_flops, (2 * 8 + 5) * 4 * 2 * 12 * 100);
  EXPECT_DOUBLE_EQ(c.evict_s, 19200e-12 + 2 * 6 * 1e-6);
  EXPECT_DOUBLE_EQ(c.total_s, c.evict_s);

  // R-KV: 8 recent queries plus key-key redundancy (d per pair, per KV head and layer).
  const CostModel rkv(ToyModel(), g, PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kRkv)));
  EXPECT_DOUBLE_EQ(rkv.Step(load).evict_flops, (2 * 8 + 5) * 4 * 2 * 8 * 100 + 2 * 8 * 2 * 2 * 10000.0);
  // Streaming scores nothing: compaction only.
  const CostModel streaming(ToyModel(), g, PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kStreaming)));
  EXPECT_DOUBLE_EQ(streaming.Step(load).evict_flops, 0);
}

TEST(CostModel, AttentionObservingPoliciesPayForTheProbabilities) {
  StepLoad load;
  load.tokens = load.sampled = 1;
  load.kv_read_slots = load.attn_pairs = load.observed_pairs = 32;
  load.kv_write_slots = 1;
  const CostModel full(ToyModel(), ToyGpu(), PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull)));
  const CostModel h2o(ToyModel(), ToyGpu(), PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kH2o)));
  // f32 probabilities of 4 heads x 2 layers x 32 slots, written and read.
  EXPECT_DOUBLE_EQ(h2o.Step(load).bytes - full.Step(load).bytes, 2.0 * 4 * 4 * 2 * 32);
  KvPolicyOptions global = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  EXPECT_FALSE(PolicyCostFor(global).observes_attention);
  global.beacon_filter = BeaconFilter::kGlobal;
  EXPECT_TRUE(PolicyCostFor(global).observes_attention);
}

TEST(GpuProfile, ShippedProfilesLoadWithASourcePerConstant) {
  for (const char* name : {"h200", "h100-sxm"}) {
    absl::StatusOr<GpuProfile> p =
        LoadGpuProfile(test::Src(std::string("configs/gpus/") + name + ".json"), DefaultShippedRoots(""));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->sources.size(), GpuProfileKeys().size());
    for (const auto& [key, src] : p->sources) {
      EXPECT_FALSE(src.source.empty()) << key;
      EXPECT_NE(src.kind, "measured") << key << ": no GPU measurement exists yet";
    }
    EXPECT_TRUE(p->MeasuredKeys().empty());
    EXPECT_DOUBLE_EQ(p->bf16_flops, 989.5e12);
  }
  absl::StatusOr<GpuProfile> h200 = LoadGpuProfile(test::Src("configs/gpus/h200.json"), DefaultShippedRoots(""));
  ASSERT_TRUE(h200.ok());
  EXPECT_DOUBLE_EQ(h200->memory_bytes, 141e9);
  EXPECT_DOUBLE_EQ(h200->hbm_bandwidth, 4.8e12);
}

TEST(GpuProfile, BadProfilesNameTheProblem) {
  absl::StatusOr<nlohmann::json> good = ReadJsonFile(test::Src("configs/gpus/h200.json"));
  ASSERT_TRUE(good.ok());
  auto expect_error = [](nlohmann::json j, const std::string& needle) {
    absl::StatusOr<GpuProfile> p = ParseGpuProfile(j, "x.json");
    ASSERT_FALSE(p.ok()) << needle;
    EXPECT_TRUE(absl::IsInvalidArgument(p.status()));
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status();
    EXPECT_NE(p.status().message().find("x.json"), std::string::npos) << p.status();
  };
  nlohmann::json j = *good;
  j["constants"].erase("hbm_bandwidth");
  expect_error(j, "hbm_bandwidth");
  j = *good;
  j["constants"]["hbm_bandwith"] = j["constants"]["hbm_bandwidth"];
  expect_error(j, "unknown constant 'hbm_bandwith'");
  j = *good;
  j["constants"]["bandwidth_efficiency"]["value"] = 1.5;
  expect_error(j, "bandwidth_efficiency");
  j = *good;
  j["constants"]["bf16_flops"]["kind"] = "guessed";
  expect_error(j, "kind 'guessed'");
  j = *good;
  j["constants"]["memory_bytes"].erase("source");
  expect_error(j, "'source'");
  EXPECT_TRUE(absl::IsNotFound(LoadGpuProfile("a100-nonexistent", DefaultShippedRoots("")).status()));
  EXPECT_NE(LoadGpuProfile("a100-nonexistent", DefaultShippedRoots("")).status().message().find("h100-sxm, h200"),
            std::string::npos);
}

}  // namespace
}  // namespace beacon::planner
