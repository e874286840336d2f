// LaunchBeaconScore against a real BeaconPolicy (CreateKvPolicy, beacon,
// kAll) fed the same queries through ObserveQuery, scoring a host KvCache
// whose keys are the device's bf16 keys widened to f32.
//
// Tolerance: |device - cpu| <= 1e-3 * max(cpu row) + 1e-6 per (layer, kv
// head) row. Both sides rotate the same fp32 queries with the same double
// angles and score the same key values; they differ only in fp32 summation
// order (dot products of <= 128 terms, softmax sums over <= 1000 slots),
// i.e. relative errors ~1e-6 in the probabilities (the tensor-core kernel
// adds its split queries' 2^-17, checked more tightly against the CUDA-core
// kernel in RunCase). A wrong beacon set, a
// wrong rotation position, a missing ring entry or a wrong pool would change
// scores by far more than 1e-3 of the row's maximum.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/rope_scaling.h"
#include "kernels/cuda/beacon_state.h"
#include "kv/policy/kv_policy.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/kv_mirror_test_util.h"

namespace beacon {
namespace beacon_score_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::KvMirror;

struct Case {
  int n_heads, n_kv_heads, head_dim;
  int recent, beacons, fps_bound;
  int tokens;  // queries observed
  int32_t n_slots;
  int pool_kernel;
  bool interleaved;
  bool explicit_inv_freq;  // pass the frequencies as rope.inv_freq instead of theta
  // A YaRN model (factor 4 over 64 positions): the policy's PolicyModelInfo
  // and the kernel's rope.inv_freq / attention_factor get its RopeTable.
  bool yarn = false;
};

// Scores the sequence's slots with `kernel` into *got and compares every
// (layer, KV head) row with the policy's Score (the tolerance in the file
// comment).
void ExpectScoresMatch(KvPolicy& policy, KvMirror& mirror, SequenceKv& seq, const int32_t* table, const BeaconDims& d,
                       const Case& c, const void* state, int32_t position, const RopeParams& rope,
                       BeaconScoreKernel kernel, std::vector<float>* got_out) {
  DeviceBuffer<char> ws(BeaconScoreWorkspaceBytes(d, c.n_slots));
  DeviceBuffer<float> scores(static_cast<size_t>(d.n_layers) * c.n_kv_heads * c.n_slots);
  ASSERT_EQ(scores.PoisonWithNaN(), cudaSuccess);
  ASSERT_EQ(LaunchBeaconScore(d, state, c.tokens, mirror.Device(), table, c.n_slots, position, rope, c.pool_kernel,
                              scores.get(), ws.get(), nullptr, kernel),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float>& got = *got_out;
  ASSERT_EQ(scores.Download(&got), cudaSuccess);

  std::vector<float> want(c.n_slots);
  for (int l = 0; l < d.n_layers; ++l) {
    KeysView keys(mirror.cache(), &seq, l);
    for (int h = 0; h < c.n_kv_heads; ++h) {
      policy.Score(l, h, keys, position, want.data());
      const float* g = got.data() + (static_cast<size_t>(l) * c.n_kv_heads + h) * c.n_slots;
      const float peak = *std::max_element(want.begin(), want.end());
      const double tol = 1e-3 * peak + 1e-6;
      int bad = 0;
      for (int32_t s = 0; s < c.n_slots; ++s) {
        if (std::isfinite(g[s]) && std::abs(g[s] - want[s]) <= tol) continue;
        if (++bad <= 5)
          ADD_FAILURE() << "layer " << l << " kv head " << h << " slot " << s << ": got " << g[s] << " want " << want[s]
                        << " (tol " << tol << ")";
      }
      EXPECT_EQ(bad, 0) << "layer " << l << " kv head " << h;
    }
  }
}

void RunCase(const Case& c) {
  const std::string what = "heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + " d " +
                           std::to_string(c.head_dim) + " tokens " + std::to_string(c.tokens) + " slots " +
                           std::to_string(c.n_slots) + " pool " + std::to_string(c.pool_kernel) +
                           (c.interleaved ? " interleaved" : " half") + (c.explicit_inv_freq ? " inv_freq" : "") +
                           (c.yarn ? " yarn" : "");
  SCOPED_TRACE(what);
  constexpr int kLayers = 2, kBlockSize = 16;
  constexpr float kTheta = 10000.0f;
  BeaconDims d;
  d.n_layers = kLayers, d.n_heads = c.n_heads, d.n_kv_heads = c.n_kv_heads, d.head_dim = c.head_dim;
  d.recent = c.recent, d.beacons = c.beacons, d.fps_bound = c.fps_bound;

  // CPU policy.
  PolicyModelInfo m;
  m.n_layers = kLayers, m.n_heads = c.n_heads, m.n_kv_heads = c.n_kv_heads, m.head_dim = c.head_dim;
  m.rope_theta = kTheta, m.rope_interleaved = c.interleaved;
  if (c.yarn) {
    m.rope =
        MakeRopeTable(kTheta, c.head_dim, {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64});
  }
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.recent_queries = c.recent, o.beacons = c.beacons, o.fps_bound = c.fps_bound, o.pool_kernel = c.pool_kernel;
  o.beacon_filter = BeaconFilter::kAll;
  absl::StatusOr<std::unique_ptr<KvPolicy>> policy = CreateKvPolicy(o, m);
  ASSERT_TRUE(policy.ok()) << policy.status();

  // The same queries into the device state, in two chunks.
  const BeaconStateLayout lay = BeaconStateLayout::For(d);
  DeviceBuffer<char> state(lay.total_bytes);
  ASSERT_EQ(state.status(), cudaSuccess);
  ASSERT_EQ(cudaMemset(state.get(), 0, lay.total_bytes), cudaSuccess);
  const size_t row = static_cast<size_t>(c.n_heads) * c.head_dim;
  std::mt19937_64 rng(c.head_dim * 1000 + c.tokens);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int32_t kFirstPos = 3000;  // large angles
  const int split = c.tokens / 3;
  for (auto [t0, t1] : {std::pair{0, split}, std::pair{split, c.tokens}}) {
    const int n = t1 - t0;
    if (n == 0) continue;
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = kFirstPos + t0 + i;
    DeviceBuffer<int32_t> dpos(n);
    DeviceBuffer<float> dq(n * row);
    std::vector<BeaconObserveEntry> entry = {{state.get(), 0, n, t0}};
    DeviceBuffer<BeaconObserveEntry> dentry(1);
    ASSERT_EQ(dpos.Upload(pos), cudaSuccess);
    ASSERT_EQ(dentry.Upload(entry), cudaSuccess);
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> q(n * row);
      for (float& x : q) x = normal(rng);
      for (int i = 0; i < n; ++i) (*policy)->ObserveQuery(l, q.data() + i * row, pos[i]);
      ASSERT_EQ(dq.Upload(q), cudaSuccess);
      ASSERT_EQ(LaunchBeaconObserve(d, l, dentry.get(), 1, n, dq.get(), dpos.get(), nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
  }

  // Keys, identical on both sides, in a non-contiguous block table.
  const KvCacheShape shape{kLayers, c.n_kv_heads, c.head_dim, kBlockSize};
  const int32_t blocks_needed = (c.n_slots + kBlockSize - 1) / kBlockSize;
  KvMirror mirror(shape, 2 * blocks_needed + 2);
  ASSERT_EQ(mirror.status(), cudaSuccess);
  // Positions up to 100 past the beacons' (the scoring position below): a
  // beacon sees about 97% of the slots and a ring query, at its own
  // position, a little fewer, so every softmax spreads over many slots and
  // its values show the logits' precision (positions over a wider range
  // would leave about one visible slot per query, and probabilities of 1).
  const int32_t position = kFirstPos + c.tokens + 7;
  mirror.FillRandom(c.n_slots + c.head_dim, /*key_std=*/2.0f, /*max_pos=*/position + 100);
  ASSERT_EQ(mirror.Upload(), cudaSuccess);
  SequenceKv seq(mirror.cache()), other(mirror.cache());
  cuda_test::ReserveInterleaved(c.n_slots, kBlockSize, &seq, &other);
  DeviceBuffer<int32_t> table(seq.block_ids().size());
  ASSERT_EQ(table.Upload(seq.block_ids()), cudaSuccess);

  RopeParams rope;
  rope.style = c.interleaved ? RopeStyle::kInterleaved : RopeStyle::kHalf;
  rope.theta = kTheta;
  DeviceBuffer<float> inv_freq(c.head_dim / 2);
  if (c.explicit_inv_freq || c.yarn) {
    std::vector<float> f(c.head_dim / 2);
    RopeInvFreq(kTheta, c.head_dim, f.data());
    if (c.yarn) f = m.rope.inv_freq, rope.attention_factor = m.rope.attention_factor;
    ASSERT_EQ(inv_freq.Upload(f), cudaSuccess);
    rope.inv_freq = inv_freq.get();
    rope.theta = -1.0f;  // ignored when inv_freq is given
  }
  // Both kernels (kMma runs its tensor-core tiles at head_dim 64 and 128 and
  // the CUDA-core ones elsewhere) against the same CPU scores.
  std::vector<float> simt, mma;
  for (auto [kernel, got] : {std::pair{BeaconScoreKernel::kSimt, &simt}, std::pair{BeaconScoreKernel::kMma, &mma}}) {
    SCOPED_TRACE(kernel == BeaconScoreKernel::kMma ? "tensor cores" : "CUDA cores");
    ExpectScoresMatch(**policy, mirror, seq, table.get(), d, c, state.get(), position, rope, kernel, got);
  }
  // The split queries keep the tensor-core logits within 2^-17 of
  // sum |q_i k_i| (at most 1.2e-4 here, after the scale; 1e-5 typical) of
  // the fp32 ones, so each probability agrees with the CUDA-core kernel's to
  // 3e-4 of itself (above 1e-6 of the row's peak, where underflow starts to
  // matter and selection does not). Queries rounded to bf16 once (2^-9: a
  // typical logit moves by 2e-3) fail this; the CPU tolerance above, relative
  // to the peak, does not see them.
  ASSERT_EQ(simt.size(), mma.size());
  const size_t slots = static_cast<size_t>(c.n_slots);
  for (size_t r0 = 0; r0 < simt.size(); r0 += slots) {
    const float peak = *std::max_element(simt.begin() + r0, simt.begin() + r0 + slots);
    int bad = 0;
    for (size_t i = r0; i < r0 + slots; ++i) {
      if (std::abs(mma[i] - simt[i]) <= 3e-4 * std::abs(simt[i]) + 1e-6 * peak) continue;
      if (++bad <= 5)
        ADD_FAILURE() << "row " << r0 / slots << " slot " << i - r0 << ": mma " << mma[i] << " simt " << simt[i];
    }
    EXPECT_EQ(bad, 0) << "row " << r0 / slots << " (layer x KV head)";
  }
}
TEST(CudaBeaconScoreTest, MatchesBeaconPolicyAfterShrinks) {
  BEACON_REQUIRE_CUDA_DEVICE();
  // 150 tokens, U = 64, K = 16: buffers shrank twice and hold 54 points, so
  // the beacons are a real FPS at scoring time.
  for (int head_dim : {32, 64, 128}) {
    for (int pool : {1, 7}) RunCase({4, 2, head_dim, 8, 16, 64, 150, 301, pool, false, false});
  }
  RunCase({4, 2, 64, 8, 16, 64, 150, 301, 1, true, false});  // interleaved pairs
  RunCase({4, 2, 64, 8, 16, 64, 150, 301, 5, false, true});  // frequencies from rope.inv_freq
}

// Beacons and recent queries of a YaRN model are rotated with its scaled
// frequencies and attention factor, on the device as in BeaconPolicy.
TEST(CudaBeaconScoreTest, ScaledRopeMatchesBeaconPolicy) {
  BEACON_REQUIRE_CUDA_DEVICE();
  RunCase({4, 2, 64, 8, 16, 64, 150, 301, 1, false, false, true});
  RunCase({4, 2, 32, 8, 16, 64, 150, 301, 3, true, false, true});
}

TEST(CudaBeaconScoreTest, ManyQueriesGroupOfThreeAndManySlots) {
  BEACON_REQUIRE_CUDA_DEVICE();
  // R + K = 48 queries per head (two query tiles), group 3, 1000 slots.
  RunCase({6, 2, 64, 32, 16, 40, 100, 1000, 3, false, false});
  RunCase({6, 2, 20, 32, 16, 40, 100, 77, 1, true, false});  // head_dim not a multiple of 4
  // R1-Distill-Qwen-7B's group of 7 at head_dim 128.
  RunCase({14, 2, 128, 16, 16, 64, 150, 301, 1, false, false});
  // 5000 slots = 157 chunks of 32: the softmax stats merge 8 chunks per block
  // (kMinChunksPerGroup), 20 groups; 17,000 slots = 532 chunks: 9 a block
  // (kMaxGroups bounds the groups), 60 groups, at head_dim 64 (both kernels).
  RunCase({4, 2, 32, 8, 16, 64, 150, 5000, 3, false, false});
  RunCase({2, 1, 64, 8, 16, 64, 150, 17000, 1, false, false});
}

// Groups of one: the state of beacon_group_queries, whose state heads are the
// KV heads (BeaconDimsFor), scores so; the group means that feed it are
// checked by beacon_group_mean_test.cc.
TEST(CudaBeaconScoreTest, GroupsOfOneAsGroupSharedStateHasThem) {
  BEACON_REQUIRE_CUDA_DEVICE();
  RunCase({2, 2, 128, 16, 16, 64, 150, 301, 1, false, false});
  RunCase({8, 8, 64, 8, 16, 64, 150, 301, 3, true, false});
}

TEST(CudaBeaconScoreTest, FewOrNoQueries) {
  BEACON_REQUIRE_CUDA_DEVICE();
  // 5 tokens: the ring is not full and the buffer holds fewer than K points,
  // all of them beacons.
  RunCase({4, 2, 64, 8, 16, 64, 5, 40, 3, true, false});
  // Nothing observed: every score is 0.
  RunCase({4, 2, 64, 8, 16, 64, 0, 40, 1, false, false});
  // One slot.
  RunCase({4, 4, 32, 8, 16, 64, 20, 1, 3, false, false});
}

TEST(CudaBeaconScoreTest, RejectsBadArgumentsWithoutLaunching) {
  BeaconDims d;
  d.n_layers = 2, d.n_heads = 4, d.n_kv_heads = 2, d.head_dim = 64;
  d.recent = 8, d.beacons = 16, d.fps_bound = 64;
  PagedKv kv;
  kv.k = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});  // never dereferenced
  kv.layout.n_layers = 2, kv.layout.n_kv_heads = 2, kv.layout.head_dim = 64, kv.layout.num_blocks = 4;
  auto* state = reinterpret_cast<void*>(uintptr_t{256});
  auto* table = reinterpret_cast<const int32_t*>(uintptr_t{256});
  auto* out = reinterpret_cast<float*>(uintptr_t{256});
  RopeParams rope;
  EXPECT_EQ(LaunchBeaconScore(d, state, 3, kv, table, 10, 5, rope, 2, out, state, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconScore(d, state, -1, kv, table, 10, 5, rope, 1, out, state, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconScore(d, nullptr, 3, kv, table, 10, 5, rope, 1, out, state, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconScore(d, state, 3, kv, table, 10, 5, rope, 1, out, nullptr, nullptr), cudaErrorInvalidValue);
  PagedKv wrong = kv;
  wrong.layout.head_dim = 128;
  EXPECT_EQ(LaunchBeaconScore(d, state, 3, wrong, table, 10, 5, rope, 1, out, state, nullptr), cudaErrorInvalidValue);
  RopeParams no_theta;
  no_theta.theta = 0.0f;
  EXPECT_EQ(LaunchBeaconScore(d, state, 3, kv, table, 10, 5, no_theta, 1, out, state, nullptr), cudaErrorInvalidValue);
  RopeParams no_magnitude;
  no_magnitude.attention_factor = 0.0f;
  EXPECT_EQ(LaunchBeaconScore(d, state, 3, kv, table, 10, 5, no_magnitude, 1, out, state, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconScore(d, state, 3, kv, table, 0, 5, rope, 1, out, state, nullptr), cudaSuccess);
  EXPECT_GT(BeaconScoreWorkspaceBytes(d, 100), BeaconScoreWorkspaceBytes(d, 10));
}

}  // namespace
}  // namespace beacon_score_test
}  // namespace beacon
