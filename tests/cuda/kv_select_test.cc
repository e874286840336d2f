// LaunchSelectKeep against kv/policy/selection.h's SelectKeep on the same scores
// and slot positions: the keep lists must be identical (no tolerance: both
// sides compare the same floats). Scores come distinct, with planted ties
// (a coarse grid, so the tie rule "later slot wins" decides at the
// threshold), with +0 / -0 mixed (equal under SelectKeep), and negative.
#include "kernels/cuda/kv_select.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/selection.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/kv_mirror_test_util.h"

namespace beacon {
namespace kv_select_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::KvMirror;

enum class ScoreKind { kDistinct, kCoarseTies, kSignedZeros, kNegative };

std::vector<float> MakeScores(ScoreKind kind, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> s(n);
  for (float& x : s) {
    const float r = u(rng);
    switch (kind) {
      case ScoreKind::kDistinct: x = r; break;
      case ScoreKind::kCoarseTies: x = std::floor(r * 6.0f) / 6.0f; break;  // six values
      case ScoreKind::kSignedZeros: x = r < 0.3f ? 0.0f : r < 0.6f ? -0.0f : r; break;
      case ScoreKind::kNegative: x = -1000.0f * r; break;
    }
  }
  return s;
}

struct Case {
  int32_t n_slots;
  int32_t n_keep;
  Protection prot;
  ScoreKind kind;
};

void RunCase(const Case& c, uint64_t seed) {
  SCOPED_TRACE("slots " + std::to_string(c.n_slots) + " keep " + std::to_string(c.n_keep) + " prompt " +
               std::to_string(c.prot.prompt_len) + (c.prot.keep_prompt ? " kept" : " not kept") + " sinks " +
               std::to_string(c.prot.sinks) + " window " + std::to_string(c.prot.window) + " kind " +
               std::to_string(static_cast<int>(c.kind)));
  constexpr int kLayers = 2, kKvHeads = 3, kBlockSize = 16, kHeadDim = 8;
  const int32_t blocks = (c.n_slots + kBlockSize - 1) / kBlockSize;
  KvMirror mirror({kLayers, kKvHeads, kHeadDim, kBlockSize}, 2 * blocks + 2);
  ASSERT_EQ(mirror.status(), cudaSuccess);
  SequenceKv seq(mirror.cache()), other(mirror.cache());
  cuda_test::ReserveInterleaved(c.n_slots, kBlockSize, &seq, &other);
  // Positions: increasing per (layer, head) with gaps, as after evictions
  // (each head kept different tokens).
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> gap(1, 3);
  for (int l = 0; l < kLayers; ++l)
    for (int h = 0; h < kKvHeads; ++h) {
      int32_t p = 0;
      for (int32_t s = 0; s < c.n_slots; ++s, p += gap(rng)) {
        mirror.SetPos(l, seq.block_ids()[s / kBlockSize], h, s % kBlockSize, p);
      }
    }
  ASSERT_EQ(mirror.Upload(), cudaSuccess);
  const std::vector<float> scores = MakeScores(c.kind, static_cast<size_t>(kLayers) * kKvHeads * c.n_slots, rng);

  DeviceBuffer<int32_t> table(seq.block_ids().size());
  ASSERT_EQ(table.Upload(seq.block_ids()), cudaSuccess);
  DeviceBuffer<float> dscores(scores.size());
  ASSERT_EQ(dscores.Upload(scores), cudaSuccess);
  const size_t ws_bytes = SelectKeepWorkspaceBytes(kLayers, kKvHeads, c.n_slots);
  DeviceBuffer<char> ws(ws_bytes);
  DeviceBuffer<int32_t> keep(static_cast<size_t>(kLayers) * kKvHeads * c.n_keep);
  ASSERT_EQ(cudaMemset(keep.get(), 0xFF, keep.size() * sizeof(int32_t)), cudaSuccess);  // -1: unwritten
  DeviceProtection dp;
  dp.prompt_len = c.prot.prompt_len, dp.sinks = c.prot.sinks, dp.window = c.prot.window;
  dp.keep_prompt = c.prot.keep_prompt;
  ASSERT_EQ(LaunchSelectKeep(dscores.get(), mirror.Device(), table.get(), c.n_slots, dp, c.n_keep, keep.get(), ws.get(),
                             ws_bytes, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int32_t> got;
  ASSERT_EQ(keep.Download(&got), cudaSuccess);

  std::vector<int32_t> want;
  for (int l = 0; l < kLayers; ++l) {
    KeysView keys(mirror.cache(), &seq, l);
    for (int h = 0; h < kKvHeads; ++h) {
      const size_t row = static_cast<size_t>(l) * kKvHeads + h;
      SelectKeep(scores.data() + row * c.n_slots, keys, h, c.prot, c.n_keep, &want);
      const std::vector<int32_t> g(got.begin() + row * c.n_keep, got.begin() + (row + 1) * c.n_keep);
      EXPECT_EQ(g, want) << "layer " << l << " kv head " << h;
    }
  }
}

Protection Prot(int32_t prompt_len, bool keep_prompt, int32_t sinks, int32_t window) {
  Protection p;
  p.prompt_len = prompt_len, p.keep_prompt = keep_prompt, p.sinks = sinks, p.window = window;
  return p;
}

TEST(CudaSelectKeepTest, MatchesSelectKeep) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1;
  for (ScoreKind kind : {ScoreKind::kDistinct, ScoreKind::kCoarseTies, ScoreKind::kSignedZeros, ScoreKind::kNegative}) {
    // Prompt (positions < 40) kept, sinks, window; about half the rest kept.
    RunCase({300, 150, Prot(40, true, 4, 32), kind}, seed++);
    // Prompt not protected; several rounds of the output scan (> 512 slots).
    RunCase({2000, 700, Prot(40, false, 4, 32), kind}, seed++);
    // No protection at all; keep one / all but one / all.
    RunCase({37, 1, Prot(0, false, 0, 0), kind}, seed++);
    RunCase({37, 36, Prot(0, false, 0, 0), kind}, seed++);
    RunCase({37, 37, Prot(0, false, 0, 0), kind}, seed++);
  }
}

TEST(CudaSelectKeepTest, MoreProtectedThanKeptKeepsTheEarliest) {
  BEACON_REQUIRE_CUDA_DEVICE();
  RunCase({300, 10, Prot(0, false, 4, 32), ScoreKind::kDistinct}, 50);       // 36 protected
  RunCase({300, 36, Prot(0, false, 4, 32), ScoreKind::kDistinct}, 51);       // exactly the protected ones
  RunCase({300, 100, Prot(1000, true, 4, 32), ScoreKind::kCoarseTies}, 52);  // every slot is prompt
  RunCase({1, 1, Prot(0, false, 4, 32), ScoreKind::kDistinct}, 53);
}

TEST(CudaSelectKeepTest, RejectsBadArgumentsWithoutLaunching) {
  PagedKv kv;
  kv.pos = reinterpret_cast<int32_t*>(uintptr_t{256});  // never dereferenced
  kv.layout.n_layers = 2, kv.layout.n_kv_heads = 2, kv.layout.head_dim = 64, kv.layout.num_blocks = 4;
  auto* f = reinterpret_cast<const float*>(uintptr_t{256});
  auto* t = reinterpret_cast<const int32_t*>(uintptr_t{256});
  auto* k = reinterpret_cast<int32_t*>(uintptr_t{256});
  void* ws = reinterpret_cast<void*>(uintptr_t{256});
  const size_t bytes = SelectKeepWorkspaceBytes(2, 2, 10);
  const DeviceProtection p;
  EXPECT_EQ(LaunchSelectKeep(f, kv, t, 10, p, 11, k, ws, bytes, nullptr), cudaErrorInvalidValue);  // keep > slots
  EXPECT_EQ(LaunchSelectKeep(f, kv, t, 10, p, -1, k, ws, bytes, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSelectKeep(nullptr, kv, t, 10, p, 5, k, ws, bytes, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSelectKeep(f, kv, t, 10, p, 5, k, ws, bytes - 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSelectKeep(f, kv, t, 10, p, 0, k, ws, bytes, nullptr), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace kv_select_test
}  // namespace beacon
