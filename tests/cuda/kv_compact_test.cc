// LaunchCompact against kv/store/compaction.h's CompactLayer on the same cache
// contents: afterwards the whole device cache (every layer, every block,
// the sequence's and a neighbour's) equals the host cache bit for bit.
#include "kernels/cuda/kv_compact.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kv/store/compaction.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/kv_mirror_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::KvMirror;

enum class KeepKind {
  kRandom,      // the first `prefix` slots, then a random ascending subset
  kShiftByOne,  // keep[i] = i + 1: every source is the previous row's destination
  kIdentity,    // nothing moves
};

// keep[h] of one layer, n_keep ascending slots of [0, n_slots).
std::vector<std::vector<int32_t>> MakeKeep(KeepKind kind, int n_kv_heads, int32_t n_slots, int32_t n_keep,
                                           int32_t prefix, std::mt19937_64& rng) {
  std::vector<std::vector<int32_t>> keep(n_kv_heads);
  for (auto& k : keep) {
    switch (kind) {
      case KeepKind::kRandom: {
        std::vector<int32_t> rest(n_slots - prefix);
        std::iota(rest.begin(), rest.end(), prefix);
        std::shuffle(rest.begin(), rest.end(), rng);
        k.resize(prefix);
        std::iota(k.begin(), k.end(), 0);
        k.insert(k.end(), rest.begin(), rest.begin() + (n_keep - prefix));
        std::sort(k.begin(), k.end());
        break;
      }
      case KeepKind::kShiftByOne:
        k.resize(n_keep);
        std::iota(k.begin(), k.end(), n_slots - n_keep);  // n_keep = n_slots - 1: starts at 1
        break;
      case KeepKind::kIdentity:
        k.resize(n_keep);
        std::iota(k.begin(), k.end(), 0);
        break;
    }
  }
  return keep;
}

void RunCase(int head_dim, int32_t n_slots, int32_t n_keep, int32_t prefix, KeepKind kind, uint64_t seed) {
  SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " slots " + std::to_string(n_slots) + " keep " +
               std::to_string(n_keep) + " kind " + std::to_string(static_cast<int>(kind)));
  constexpr int kLayers = 2, kKvHeads = 2, kBlockSize = 16;
  const int32_t blocks = (n_slots + kBlockSize - 1) / kBlockSize;
  KvMirror mirror({kLayers, kKvHeads, head_dim, kBlockSize}, 2 * blocks + 3);
  ASSERT_EQ(mirror.status(), cudaSuccess);
  mirror.FillRandom(seed, 1.0f);
  ASSERT_EQ(mirror.Upload(), cudaSuccess);
  SequenceKv seq(mirror.cache()), other(mirror.cache());
  cuda_test::ReserveInterleaved(n_slots, kBlockSize, &seq, &other);

  std::mt19937_64 rng(seed);
  std::vector<int32_t> flat;  // [layer][head][n_keep]
  for (int l = 0; l < kLayers; ++l) {
    const auto keep = MakeKeep(kind, kKvHeads, n_slots, n_keep, prefix, rng);
    for (const auto& k : keep) flat.insert(flat.end(), k.begin(), k.end());
    CompactLayer(mirror.cache(), seq, l, keep);
  }
  DeviceBuffer<int32_t> table(seq.block_ids().size()), dkeep(flat.size());
  ASSERT_EQ(table.Upload(seq.block_ids()), cudaSuccess);
  ASSERT_EQ(dkeep.Upload(flat), cudaSuccess);
  ASSERT_EQ(LaunchCompact(mirror.Device(), table.get(), dkeep.get(), n_keep, n_slots, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<uint16_t> k, v;
  std::vector<int32_t> pos;
  ASSERT_EQ(mirror.Download(&k, &v, &pos), cudaSuccess);
  // The host cache after CompactLayer, in the device layout.
  const PagedKvLayout& lay = mirror.layout();
  KvCache* cache = mirror.cache();
  int bad = 0;
  for (int l = 0; l < kLayers; ++l)
    for (int32_t b = 0; b < lay.num_blocks; ++b)
      for (int h = 0; h < kKvHeads; ++h)
        for (int s = 0; s < kBlockSize; ++s) {
          bool ok = pos[lay.PosIndex(l, b, h, s)] == cache->Positions(l, b, h)[s];
          for (int c = 0; c < head_dim; ++c) {
            const size_t at = lay.KvIndex(l, b, h, s) + c;
            ok = ok && k[at] == Fp32ToBf16(cache->K(l, b, h)[s * head_dim + c]) &&
                 v[at] == Fp32ToBf16(cache->V(l, b, h)[s * head_dim + c]);
          }
          if (!ok && ++bad <= 5) {
            ADD_FAILURE() << "layer " << l << " block " << b << " head " << h << " slot " << s << " differs";
          }
        }
  EXPECT_EQ(bad, 0);
}

TEST(CudaCompactTest, MatchesCompactLayerBitForBit) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1;
  // 20: the 4-byte copy path; 32, 64, 128: 16-byte. 150 of 200 rows is
  // several rounds for every head_dim.
  for (int head_dim : {20, 32, 64, 128}) {
    RunCase(head_dim, 200, 150, 20, KeepKind::kRandom, seed++);
    RunCase(head_dim, 200, 1, 0, KeepKind::kRandom, seed++);
    RunCase(head_dim, 200, 199, 0, KeepKind::kShiftByOne, seed++);
    RunCase(head_dim, 200, 200, 0, KeepKind::kIdentity, seed++);
    RunCase(head_dim, 1000, 600, 300, KeepKind::kRandom, seed++);
  }
  RunCase(256, 300, 100, 10, KeepKind::kRandom, seed++);
}

TEST(CudaCompactTest, RejectsBadArgumentsWithoutLaunching) {
  PagedKv kv;
  kv.k = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});  // never dereferenced
  kv.v = kv.k;
  kv.pos = reinterpret_cast<int32_t*>(uintptr_t{256});
  kv.layout.n_layers = 2, kv.layout.n_kv_heads = 2, kv.layout.head_dim = 64, kv.layout.num_blocks = 4;
  auto* t = reinterpret_cast<const int32_t*>(uintptr_t{256});
  EXPECT_EQ(LaunchCompact(kv, t, t, 11, 10, nullptr), cudaErrorInvalidValue);  // keep > slots
  EXPECT_EQ(LaunchCompact(kv, t, t, -1, 10, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchCompact(kv, nullptr, t, 5, 10, nullptr), cudaErrorInvalidValue);
  PagedKv odd = kv;
  odd.layout.head_dim = 63;
  EXPECT_EQ(LaunchCompact(odd, t, t, 5, 10, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchCompact(kv, t, t, 0, 10, nullptr), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace beacon
