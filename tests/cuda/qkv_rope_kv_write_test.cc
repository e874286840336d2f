#include "kernels/cuda/qkv_rope_kv_write.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/rope_scaling.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace qkv_rope_kv_write_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;

// Tolerances. q (in place) and the cached k: one bf16 rounding (2^-9
// relative) after fp32 bias, norm and rotation; the fp32 angle
// position * inv_freq at positions up to ~3000 is off by <= ~4e-4 rad, so
// rtol 1e-2 plus atol 1e-2 for components rotated to near zero (inputs are
// O(1)). A wrong pairing, position, gain or bias gives O(1) errors.
// q_pre_rope (fp32, no rounding to bf16): bias is exact in fp32 and the norm
// is a few ulp (rsqrtf, fp32 sum of squares): rtol 1e-5, atol 1e-6.
// The cached v is bf16(v + bias), one exact fp32 add and one rounding on both
// sides: compared bit for bit, as is everything that must stay untouched.
constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-2;
constexpr double kPreRtol = 1e-5;
constexpr double kPreAtol = 1e-6;
constexpr int kLayers = 2;
constexpr int kLayer = 1;
constexpr int kBlockSize = 16;
constexpr float kEps = 1e-6f;

struct Config {
  int nq, nkv, d;
};
const Config kConfigs[] = {{8, 2, 64}, {4, 4, 128}, {6, 2, 32}, {2, 1, 18}, {4, 2, 256}};

struct Options {
  RopeStyle style;
  bool bias, norm, pre_rope, inv_freq;
};
const Options kOptions[] = {{RopeStyle::kHalf, false, false, false, false},
                            {RopeStyle::kInterleaved, true, false, false, false},
                            {RopeStyle::kHalf, false, true, true, false},
                            {RopeStyle::kInterleaved, true, true, true, true}};

// Three sequences: slots 0..4 at positions 0..4; one token at slot 37,
// position 1234 (compacted: slot != position); slots 14..30 (crossing a
// block boundary) at positions 3000..3016.
struct Tokens {
  std::vector<int32_t> seq, slot, pos;
};
Tokens MakeTokens() {
  Tokens tk;
  auto add = [&](int row, int slot, int pos) {
    tk.seq.push_back(row);
    tk.slot.push_back(slot);
    tk.pos.push_back(pos);
  };
  for (int i = 0; i < 5; ++i) add(0, i, i);
  add(1, 37, 1234);
  for (int i = 0; i < 17; ++i) add(2, 14 + i, 3000 + i);
  return tk;
}

// The header's contract in double for one head vector x (d values).
void Prepare(std::vector<double>& x, const uint16_t* bias, const std::vector<uint16_t>* gain, int pos,
             const std::vector<double>& inv_freq, double attention_factor, RopeStyle style, bool rotate,
             std::vector<double>* pre) {
  const int d = static_cast<int>(x.size()), half = d / 2;
  if (bias != nullptr) {
    for (int i = 0; i < d; ++i) x[i] += Bf16ToFp32(bias[i]);
  }
  if (gain != nullptr) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / d + kEps);
    for (int i = 0; i < d; ++i) x[i] *= scale * Bf16ToFp32((*gain)[i]);
  }
  if (pre != nullptr) *pre = x;
  if (!rotate) return;
  for (int i = 0; i < half; ++i) {
    const int ia = style == RopeStyle::kInterleaved ? 2 * i : i;
    const int ib = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
    const double angle = pos * inv_freq[i];
    const double a = x[ia], b = x[ib];
    x[ia] = attention_factor * (a * std::cos(angle) - b * std::sin(angle));
    x[ib] = attention_factor * (a * std::sin(angle) + b * std::cos(angle));
  }
}

void RunCase(const Config& c, const Options& o, uint64_t seed) {
  const Tokens tk = MakeTokens();
  const int64_t n = static_cast<int64_t>(tk.seq.size());
  const int d = c.d, width = (c.nq + 2 * c.nkv) * d;
  const std::string what = "nq " + std::to_string(c.nq) + " nkv " + std::to_string(c.nkv) + " d " + std::to_string(d) +
                           " style " + std::to_string(static_cast<int>(o.style)) + (o.bias ? " bias" : "") +
                           (o.norm ? " norm" : "") + (o.inv_freq ? " inv_freq" : "");

  // Cache: 3 rows of 1, 3 and 2 blocks from a shuffled id list, 4 spare
  // blocks; 2 layers, all with random "previous" contents that must survive.
  PagedKvLayout layout{kLayers, c.nkv, d, kBlockSize, 10};
  std::vector<int32_t> ids(layout.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::shuffle(ids.begin(), ids.end(), rng);
  const int stride = 4;
  std::vector<int32_t> table(3 * stride, -1);
  table[0] = ids[0];
  table[stride + 0] = ids[1], table[stride + 1] = ids[2], table[stride + 2] = ids[3];
  table[2 * stride + 0] = ids[4], table[2 * stride + 1] = ids[5];
  const size_t kv_elems = static_cast<size_t>(kLayers) * layout.layer_elems();
  const auto k0 = RandomBf16(kv_elems, seed + 1), v0 = RandomBf16(kv_elems, seed + 2);
  std::vector<int32_t> pos0(kv_elems / d);
  for (size_t i = 0; i < pos0.size(); ++i) pos0[i] = -1000 - static_cast<int32_t>(i);

  const auto qkv = RandomBf16(n * width, seed + 3);
  const auto bias = RandomBf16(width, seed + 4, 0.5f);
  const auto q_gain = RandomBf16(d, seed + 5, 0.2f, 1.0f);
  const auto k_gain = RandomBf16(d, seed + 6, 0.2f, 1.0f);
  // With o.inv_freq: a YaRN model's table (scaled frequencies, attention
  // factor 0.1 ln 4 + 1 on cos and sin), as the CUDA backend uploads it.
  const RopeTable yarn =
      MakeRopeTable(10000.0f, d, {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64});
  const std::vector<float>& inv_freq = yarn.inv_freq;
  const double attention_factor = o.inv_freq ? yarn.attention_factor : 1.0;
  std::vector<double> inv_freq_d(d / 2);
  for (int i = 0; i < d / 2; ++i) inv_freq_d[i] = o.inv_freq ? inv_freq[i] : std::pow(10000.0, -2.0 * i / d);

  DeviceBuffer<uint16_t> dqkv(qkv.size()), dbias(width), dqg(d), dkg(d), dk(kv_elems), dv(kv_elems);
  DeviceBuffer<int32_t> dpos(pos0.size()), dtable(table.size()), dseq(n), dslot(n), dtpos(n);
  DeviceBuffer<float> dpre(n * c.nq * d), dfreq(d / 2);
  BEACON_CUDA_ASSERT_OK(dqkv.Upload(qkv));
  BEACON_CUDA_ASSERT_OK(dbias.Upload(bias));
  BEACON_CUDA_ASSERT_OK(dqg.Upload(q_gain));
  BEACON_CUDA_ASSERT_OK(dkg.Upload(k_gain));
  BEACON_CUDA_ASSERT_OK(dk.Upload(k0));
  BEACON_CUDA_ASSERT_OK(dv.Upload(v0));
  BEACON_CUDA_ASSERT_OK(dpos.Upload(pos0));
  BEACON_CUDA_ASSERT_OK(dtable.Upload(table));
  BEACON_CUDA_ASSERT_OK(dseq.Upload(tk.seq));
  BEACON_CUDA_ASSERT_OK(dslot.Upload(tk.slot));
  BEACON_CUDA_ASSERT_OK(dtpos.Upload(tk.pos));
  BEACON_CUDA_ASSERT_OK(dfreq.Upload(inv_freq));
  BEACON_CUDA_ASSERT_OK(dpre.PoisonWithNaN());

  QkvPrepParams p;
  p.qkv = reinterpret_cast<__nv_bfloat16*>(dqkv.get());
  p.n_tokens = n;
  p.n_q_heads = c.nq;
  p.n_kv_heads = c.nkv;
  p.head_dim = d;
  p.bias = o.bias ? reinterpret_cast<const __nv_bfloat16*>(dbias.get()) : nullptr;
  p.q_norm = o.norm ? reinterpret_cast<const __nv_bfloat16*>(dqg.get()) : nullptr;
  p.k_norm = o.norm ? reinterpret_cast<const __nv_bfloat16*>(dkg.get()) : nullptr;
  p.eps = kEps;
  p.rope.style = o.style;
  p.rope.theta = 10000.0f;
  p.rope.inv_freq = o.inv_freq ? dfreq.get() : nullptr;
  p.rope.attention_factor = static_cast<float>(attention_factor);
  p.q_pre_rope = o.pre_rope ? dpre.get() : nullptr;
  PagedKv kv;
  kv.k = reinterpret_cast<__nv_bfloat16*>(dk.get());
  kv.v = reinterpret_cast<__nv_bfloat16*>(dv.get());
  kv.pos = dpos.get();
  kv.layout = layout;
  BEACON_CUDA_ASSERT_OK(
      LaunchQkvRopeKvWrite(p, kv, kLayer, {dtable.get(), stride}, dseq.get(), dslot.get(), dtpos.get(), nullptr));
  BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());

  // Reference: q in place, q_pre_rope, and the cache with the written rows.
  std::vector<double> want_q, want_pre;
  std::vector<uint16_t> got_q;
  std::vector<double> want_k;
  std::vector<uint16_t> got_k_rows, want_v = v0;
  std::vector<int32_t> want_pos = pos0;
  std::vector<bool> k_written(kv_elems, false);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t block = table[tk.seq[t] * stride + tk.slot[t] / kBlockSize];
    const int off = tk.slot[t] % kBlockSize;
    for (int h = 0; h < c.nq + 2 * c.nkv; ++h) {
      std::vector<double> x(d), pre;
      for (int i = 0; i < d; ++i) x[i] = Bf16ToFp32(qkv[t * width + h * d + i]);
      const uint16_t* b = o.bias ? &bias[h * d] : nullptr;
      if (h < c.nq) {
        Prepare(x, b, o.norm ? &q_gain : nullptr, tk.pos[t], inv_freq_d, attention_factor, o.style, true, &pre);
        want_q.insert(want_q.end(), x.begin(), x.end());
        want_pre.insert(want_pre.end(), pre.begin(), pre.end());
      } else if (h < c.nq + c.nkv) {
        Prepare(x, b, o.norm ? &k_gain : nullptr, tk.pos[t], inv_freq_d, attention_factor, o.style, true, nullptr);
        const int64_t at = layout.KvIndex(kLayer, block, h - c.nq, off);
        for (int i = 0; i < d; ++i) k_written[at + i] = true;
        want_k.insert(want_k.end(), x.begin(), x.end());
      } else {
        const int kvh = h - c.nq - c.nkv;
        const int64_t at = layout.KvIndex(kLayer, block, kvh, off);
        for (int i = 0; i < d; ++i) {
          float vb = Bf16ToFp32(qkv[t * width + h * d + i]);
          if (b != nullptr) vb += Bf16ToFp32(b[i]);  // one fp32 add, as on the GPU
          want_v[at + i] = Fp32ToBf16(vb);
        }
        want_pos[layout.PosIndex(kLayer, block, kvh, off)] = tk.pos[t];
      }
    }
  }

  std::vector<uint16_t> out_qkv, out_k, out_v;
  std::vector<int32_t> out_pos;
  std::vector<float> out_pre;
  BEACON_CUDA_ASSERT_OK(dqkv.Download(&out_qkv));
  BEACON_CUDA_ASSERT_OK(dk.Download(&out_k));
  BEACON_CUDA_ASSERT_OK(dv.Download(&out_v));
  BEACON_CUDA_ASSERT_OK(dpos.Download(&out_pos));
  BEACON_CUDA_ASSERT_OK(dpre.Download(&out_pre));

  for (int64_t t = 0; t < n; ++t) {
    got_q.insert(got_q.end(), out_qkv.begin() + t * width, out_qkv.begin() + t * width + c.nq * d);
  }
  ExpectBf16Near(got_q, want_q, kRtol, kAtol, what + ": q in place");
  // Written K rows in the reference's (token, head) order; all else unchanged.
  for (int64_t t = 0; t < n; ++t) {
    const int32_t block = table[tk.seq[t] * stride + tk.slot[t] / kBlockSize];
    for (int h = 0; h < c.nkv; ++h) {
      const int64_t at = layout.KvIndex(kLayer, block, h, tk.slot[t] % kBlockSize);
      got_k_rows.insert(got_k_rows.end(), out_k.begin() + at, out_k.begin() + at + d);
    }
  }
  ExpectBf16Near(got_k_rows, want_k, kRtol, kAtol, what + ": cached k");
  size_t k_changed = 0;
  for (size_t i = 0; i < kv_elems; ++i) k_changed += !k_written[i] && out_k[i] != k0[i];
  EXPECT_EQ(k_changed, 0u) << what << ": k elements outside the written rows changed";
  EXPECT_EQ(out_v, want_v) << what << ": cached v (written rows exact, all else unchanged)";
  EXPECT_EQ(out_pos, want_pos) << what << ": cached positions";
  if (o.pre_rope) {
    ASSERT_EQ(out_pre.size(), want_pre.size());
    size_t bad = 0;
    for (size_t i = 0; i < out_pre.size(); ++i) {
      bad += !(std::abs(out_pre[i] - want_pre[i]) <= kPreAtol + kPreRtol * std::abs(want_pre[i]));
    }
    EXPECT_EQ(bad, 0u) << what << ": q_pre_rope";
  }
}

TEST(CudaQkvRopeKvWriteTest, MatchesNaiveLoopAndWritesOnlyTheTokensSlots) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1000;
  for (const Config& c : kConfigs) {
    for (const Options& o : kOptions) {
      RunCase(c, o, seed);
      seed += 10;
    }
  }
}

TEST(CudaQkvRopeKvWriteTest, RejectsBadArguments) {
  BEACON_REQUIRE_CUDA_DEVICE();
  DeviceBuffer<uint16_t> buf(4096);
  DeviceBuffer<int32_t> ints(64);
  QkvPrepParams good;
  good.qkv = reinterpret_cast<__nv_bfloat16*>(buf.get());
  good.n_tokens = 1;
  good.n_q_heads = 2;
  good.n_kv_heads = 1;
  good.head_dim = 64;
  PagedKv kv;
  kv.k = kv.v = reinterpret_cast<__nv_bfloat16*>(buf.get());
  kv.pos = ints.get();
  kv.layout = {kLayers, 1, 64, kBlockSize, 1};
  const BlockTables tables{ints.get(), 1};
  const int32_t* a = ints.get();
  auto launch = [&](const QkvPrepParams& p, const PagedKv& c, int layer) {
    return LaunchQkvRopeKvWrite(p, c, layer, tables, a, a, a, nullptr);
  };
  EXPECT_EQ(launch(good, kv, kLayers), cudaErrorInvalidValue);  // layer out of range
  EXPECT_EQ(LaunchQkvRopeKvWrite(good, kv, 0, tables, a, nullptr, a, nullptr), cudaErrorInvalidValue);
  QkvPrepParams p = good;
  p.head_dim = 63;
  EXPECT_EQ(launch(p, kv, 0), cudaErrorInvalidValue);
  p = good;
  p.n_kv_heads = 2;  // disagrees with the cache layout
  EXPECT_EQ(launch(p, kv, 0), cudaErrorInvalidValue);
  p = good;
  p.rope.theta = 0.0f;
  EXPECT_EQ(launch(p, kv, 0), cudaErrorInvalidValue);
  p = good;
  p.rope.attention_factor = 0.0f;
  EXPECT_EQ(launch(p, kv, 0), cudaErrorInvalidValue);
  p = good;
  p.eps = -1.0f;
  EXPECT_EQ(launch(p, kv, 0), cudaErrorInvalidValue);
  PagedKv no_pos = kv;
  no_pos.pos = nullptr;
  EXPECT_EQ(launch(good, no_pos, 0), cudaErrorInvalidValue);
  p = good;
  p.n_tokens = 0;
  EXPECT_EQ(launch(p, kv, 0), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace qkv_rope_kv_write_test
}  // namespace beacon
