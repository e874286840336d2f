// LaunchBeaconObserve against the CPU building blocks it mirrors: after the
// same schedule of prefill chunks and decode steps, every sequence's device
// ring equals RecentQueryRing's contents and every (layer, head) FPS buffer
// equals ContinualFps's (size, points and tags bit for bit; inverse norms
// bit for bit against ContinualFps's summation order). The CPU side is fed
// the queries rounded to bf16, as BeaconPolicy feeds it (beacon_bf16_state):
// the device stores bf16, and its widened values must equal the CPU's. No tolerance: the
// device FPS reproduces the CPU's double arithmetic, and random Gaussian
// queries have no near-ties for a rounding difference to flip.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cuda/beacon_fps_phase.h"
#include "kernels/cuda/beacon_state.h"
#include "kv/policy/attention_scoring.h"
#include "kv/policy/fps.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;

// ContinualFps::Add's 1 / |q| (its SquaredNorm's summation order).
double InvNorm(const float* q, int d) {
  double acc[8] = {};
  int i = 0;
  for (; i + 8 <= d; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(q[i + j]) * q[i + j];
  for (; i < d; ++i) acc[0] += static_cast<double>(q[i]) * q[i];
  double s = 0.0;
  for (double a : acc) s += a;
  return 1.0 / std::sqrt(s);
}

// The device's bf16 row `a`, widened, against the CPU's floats `b`.
bool SameBits(const uint16_t* a, const float* b, int n) {
  for (int i = 0; i < n; ++i) {
    const float w = Bf16ToFp32(a[i]);
    if (std::memcmp(&w, b + i, sizeof(float)) != 0) return false;
  }
  return true;
}

// Fp32ToBf16 and back: what BeaconPolicy hands the ring and ContinualFps.
std::vector<float> RoundedRow(const float* q, size_t n) {
  std::vector<float> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = Bf16ToFp32(Fp32ToBf16(q[i]));
  return r;
}

// One sequence on both sides. Tokens at positions below fps_from enter the
// ring only (BeaconPolicy with beacon_prompt_queries off, fps_from = the
// prompt's length).
struct Sequence {
  Sequence(const BeaconDims& d, int32_t first_pos, int32_t fps_from = 0) : next_pos(first_pos), fps_from(fps_from) {
    for (int l = 0; l < d.n_layers; ++l) {
      rings.push_back(std::make_unique<RecentQueryRing>(d.recent, d.n_heads, d.head_dim));
      fps.emplace_back();
      for (int h = 0; h < d.n_heads; ++h) {
        // BeaconPolicy's buffers: staggered first shrinks (beacon_fps_phase.h).
        const int phase = BeaconFpsPhase(static_cast<int64_t>(l) * d.n_heads + h,
                                         static_cast<int64_t>(d.n_layers) * d.n_heads, d.fps_bound, d.beacons);
        fps.back().emplace_back(d.head_dim, d.fps_bound, d.beacons, phase);
      }
    }
    const BeaconStateLayout lay = BeaconStateLayout::For(d);
    state = std::make_unique<DeviceBuffer<char>>(lay.total_bytes);
  }
  std::vector<std::unique_ptr<RecentQueryRing>> rings;  // per layer
  std::vector<std::vector<ContinualFps>> fps;           // [layer][head]
  std::unique_ptr<DeviceBuffer<char>> state;
  int32_t observed = 0;
  int32_t next_pos;
  int32_t fps_from;
};

// Downloads a sequence's state and compares it with its CPU twin.
void ExpectStateMatches(const BeaconDims& d, Sequence& seq, const std::string& what) {
  const BeaconStateLayout lay = BeaconStateLayout::For(d);
  std::vector<char> bytes;
  ASSERT_EQ(seq.state->Download(&bytes), cudaSuccess);
  const uint16_t* ring = reinterpret_cast<const uint16_t*>(bytes.data() + lay.ring);
  const int32_t* ring_pos = reinterpret_cast<const int32_t*>(bytes.data() + lay.ring_pos);
  const uint16_t* pts = reinterpret_cast<const uint16_t*>(bytes.data() + lay.fps_pts);
  const double* inv = reinterpret_cast<const double*>(bytes.data() + lay.fps_inv);
  const int32_t* tag = reinterpret_cast<const int32_t*>(bytes.data() + lay.fps_tag);
  const int32_t* size = reinterpret_cast<const int32_t*>(bytes.data() + lay.fps_size);
  const int D = d.head_dim, H = d.n_heads, R = d.recent, U = d.fps_bound;
  for (int l = 0; l < d.n_layers; ++l) {
    const RecentQueryRing& cr = *seq.rings[l];
    ASSERT_EQ(cr.size(), std::min(seq.observed, R)) << what;
    for (int j = 0; j < cr.size(); ++j) {
      EXPECT_EQ(ring_pos[static_cast<size_t>(l) * R + j], cr.position(j)) << what << " layer " << l << " ring " << j;
      for (int h = 0; h < H; ++h) {
        const uint16_t* got = ring + ((static_cast<size_t>(l) * R + j) * H + h) * D;
        EXPECT_TRUE(SameBits(got, cr.query(j, h), D)) << what << " layer " << l << " ring " << j << " head " << h;
      }
    }
    for (int h = 0; h < H; ++h) {
      const ContinualFps& f = seq.fps[l][h];
      const size_t lh = static_cast<size_t>(l) * H + h;
      const std::string at = what + " layer " + std::to_string(l) + " head " + std::to_string(h);
      ASSERT_EQ(size[lh], f.size()) << at;
      // The one specified word past the points: nonzero once the buffer shrank.
      EXPECT_EQ(inv[lh * U + U - 1] != 0.0, f.shrinks() > 0) << at << " shrinks " << f.shrinks();
      for (int i = 0; i < f.size(); ++i) {
        const uint16_t* got = pts + (lh * U + i) * D;
        EXPECT_TRUE(SameBits(got, f.point(i), D)) << at << " point " << i;
        EXPECT_EQ(tag[lh * U + i], f.tag(i)) << at << " point " << i;
        EXPECT_EQ(inv[lh * U + i], InvNorm(f.point(i), D)) << at << " point " << i;
      }
    }
  }
}

// One step: each (sequence index, token count) pair is one entry; entries are
// laid out in the given order. Queries are random per (token, layer), with a
// zero vector and an inf at a few planted (token, head)s that Add must refuse.
// all_layers: one LaunchBeaconObserveLayers over every layer (the layers'
// queries back to back), as the backend's decode steps do; otherwise one
// LaunchBeaconObserve per layer.
void RunStep(const BeaconDims& d, std::vector<Sequence>& seqs, const std::vector<std::pair<int, int>>& step,
             std::mt19937_64& rng, int* planted, bool all_layers = false) {
  const int D = d.head_dim, H = d.n_heads;
  const size_t row = static_cast<size_t>(H) * D;
  int total = 0, max_tokens = 0;
  for (auto [s, n] : step) total += n, max_tokens = std::max(max_tokens, n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> q(d.n_layers, std::vector<float>(total * row));
  for (auto& layer_q : q)
    for (float& x : layer_q) x = normal(rng);
  std::vector<int32_t> pos(total);
  std::vector<BeaconObserveEntry> entries;
  int t = 0;
  for (auto [s, n] : step) {
    Sequence& seq = seqs[s];
    entries.push_back({seq.state->get(), t, n, seq.observed, seq.fps_from});
    for (int i = 0; i < n; ++i, ++t) {
      pos[t] = seq.next_pos++;
      if ((*planted)++ % 97 == 13) {  // refused by Add: zero norm, then a non-finite one
        const int h = t % H, l = t % d.n_layers;
        for (int c = 0; c < D; ++c) q[l][t * row + h * D + c] = 0.0f;
        q[(l + 1) % d.n_layers][t * row + ((h + 1) % H) * D + 1] = INFINITY;
      }
    }
  }
  DeviceBuffer<BeaconObserveEntry> dentries(entries.size());
  DeviceBuffer<int32_t> dpos(total);
  DeviceBuffer<float> dq(total * row);
  ASSERT_EQ(dentries.Upload(entries), cudaSuccess);
  ASSERT_EQ(dpos.Upload(pos), cudaSuccess);
  if (all_layers) {
    std::vector<float> layers;
    for (const auto& layer_q : q) layers.insert(layers.end(), layer_q.begin(), layer_q.end());
    DeviceBuffer<float> dq_all(layers.size());
    ASSERT_EQ(dq_all.Upload(layers), cudaSuccess);
    ASSERT_EQ(LaunchBeaconObserveLayers(d, 0, d.n_layers, dentries.get(), static_cast<int>(entries.size()), max_tokens,
                                        dq_all.get(), static_cast<int64_t>(total) * row, dpos.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  for (int l = 0; l < d.n_layers && !all_layers; ++l) {
    ASSERT_EQ(dq.Upload(q[l]), cudaSuccess);
    ASSERT_EQ(LaunchBeaconObserve(d, l, dentries.get(), static_cast<int>(entries.size()), max_tokens, dq.get(),
                                  dpos.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // dq is overwritten for the next layer
  }
  t = 0;
  for (auto [s, n] : step) {
    Sequence& seq = seqs[s];
    for (int i = 0; i < n; ++i, ++t) {
      for (int l = 0; l < d.n_layers; ++l) {
        const std::vector<float> rounded = RoundedRow(q[l].data() + t * row, row);
        const float* qt = rounded.data();
        seq.rings[l]->Push(qt, pos[t]);
        if (pos[t] < seq.fps_from) continue;
        for (int h = 0; h < H; ++h) seq.fps[l][h].Add(qt + static_cast<size_t>(h) * D, pos[t]);
      }
    }
    seq.observed += n;
  }
}

TEST(CudaBeaconObserveTest, MatchesRingAndContinualFpsOverPrefillAndDecode) {
  BEACON_REQUIRE_CUDA_DEVICE();
  for (int head_dim : {20, 32, 64, 128}) {
    BeaconDims d;
    d.n_layers = 2, d.n_heads = 4, d.n_kv_heads = 2, d.head_dim = head_dim;
    d.recent = 8, d.beacons = 16, d.fps_bound = 64;
    std::vector<Sequence> seqs;
    seqs.emplace_back(d, 0);      // A: two prefill chunks, then decodes to 307 tokens
    seqs.emplace_back(d, 5000);   // B: joins in step 1
    seqs.emplace_back(d, 77777);  // C: one 200-token chunk: three shrinks in one launch
    for (Sequence& s : seqs) {
      ASSERT_EQ(s.state->status(), cudaSuccess);
      ASSERT_EQ(cudaMemset(s.state->get(), 0, s.state->size()), cudaSuccess);
    }
    std::mt19937_64 rng(head_dim);
    int planted = 0;
    const std::string what = "head_dim " + std::to_string(head_dim);
    RunStep(d, seqs, {{2, 200}, {0, 100}}, rng, &planted);
    ExpectStateMatches(d, seqs[0], what + " A after step 0");
    ExpectStateMatches(d, seqs[2], what + " C after step 0");
    RunStep(d, seqs, {{1, 30}, {0, 57}, {2, 1}}, rng, &planted);
    for (int step = 0; step < 150; ++step) {
      // Decode batches in varying order; B skips every third step. Odd steps
      // observe every layer in one launch, as the backend's decode steps do.
      if (step % 3 == 0) {
        RunStep(d, seqs, {{0, 1}, {2, 1}}, rng, &planted, step % 2 == 1);
      } else {
        RunStep(d, seqs, {{2, 1}, {1, 1}, {0, 1}}, rng, &planted, step % 2 == 1);
      }
    }
    if (HasFatalFailure()) return;
    ASSERT_EQ(seqs[0].observed, 307);
    // The schedule exercised what it is meant to: several shrinks per buffer,
    // first ones short of U (buffer (1, 3) has phase floor(7 * 48 / 8) = 42).
    EXPECT_GE(seqs[0].fps[0][0].shrinks(), 4);
    EXPECT_GE(seqs[2].fps[1][3].shrinks(), 6);
    EXPECT_EQ(seqs[2].fps[1][3].phase(), 42);
    for (int s = 0; s < 3; ++s) ExpectStateMatches(d, seqs[s], what + " sequence " + std::to_string(s));
  }
}

// A plain decode stream of one sequence, one launch per token, also checks
// that refused queries leave the buffer alone and that a launch with more
// tokens than the ring holds keeps only the last R.
TEST(CudaBeaconObserveTest, SingleSequenceRingWrapsAndRefusals) {
  BEACON_REQUIRE_CUDA_DEVICE();
  BeaconDims d;
  d.n_layers = 1, d.n_heads = 2, d.n_kv_heads = 1, d.head_dim = 16;
  d.recent = 3, d.beacons = 2, d.fps_bound = 5;
  std::vector<Sequence> seqs;
  seqs.emplace_back(d, 10);
  ASSERT_EQ(seqs[0].state->status(), cudaSuccess);
  ASSERT_EQ(cudaMemset(seqs[0].state->get(), 0, seqs[0].state->size()), cudaSuccess);
  std::mt19937_64 rng(7);
  int planted = 0;
  RunStep(d, seqs, {{0, 11}}, rng, &planted);
  ExpectStateMatches(d, seqs[0], "after an 11-token chunk");
  for (int i = 0; i < 40; ++i) RunStep(d, seqs, {{0, 1}}, rng, &planted);
  ExpectStateMatches(d, seqs[0], "after 40 decodes");
}

// fps_from_position (beacon_prompt_queries off): the prompt's tokens enter
// the ring but not the FPS buffers, within one launch that straddles the
// prompt's end too, for one entry of a batch and not for the other; a
// recompute-like restart replays the prompt at the same positions.
TEST(CudaBeaconObserveTest, TokensBeforeFpsFromPositionSkipTheBuffers) {
  BEACON_REQUIRE_CUDA_DEVICE();
  BeaconDims d;
  d.n_layers = 2, d.n_heads = 4, d.n_kv_heads = 2, d.head_dim = 32;
  d.recent = 8, d.beacons = 16, d.fps_bound = 64;
  std::vector<Sequence> seqs;
  seqs.emplace_back(d, 0, 150);  // A: a 150-token prompt
  seqs.emplace_back(d, 0);       // B: every token admitted
  seqs.emplace_back(d, 0, 150);  // C: A's prompt again, after a "preemption"
  for (Sequence& s : seqs) {
    ASSERT_EQ(s.state->status(), cudaSuccess);
    ASSERT_EQ(cudaMemset(s.state->get(), 0, s.state->size()), cudaSuccess);
  }
  std::mt19937_64 rng(11);
  int planted = 0;
  RunStep(d, seqs, {{0, 100}, {1, 100}}, rng, &planted);  // wholly inside A's prompt
  for (int l = 0; l < d.n_layers; ++l) {
    for (int h = 0; h < d.n_heads; ++h) ASSERT_EQ(seqs[0].fps[l][h].size(), 0) << "the test skips nothing";
  }
  ExpectStateMatches(d, seqs[0], "A after 100 prompt tokens");
  RunStep(d, seqs, {{1, 90}, {0, 90}}, rng, &planted);  // straddles A's prompt end: 50 skipped, 40 admitted
  ExpectStateMatches(d, seqs[0], "A after a straddling chunk");
  RunStep(d, seqs, {{2, 170}}, rng, &planted);  // C replays prompt and some generated tokens in one launch
  for (int step = 0; step < 40; ++step) RunStep(d, seqs, {{0, 1}, {1, 1}, {2, 1}}, rng, &planted);
  if (HasFatalFailure()) return;
  for (int s = 0; s < 3; ++s) ExpectStateMatches(d, seqs[s], "sequence " + std::to_string(s));
  for (int s : {0, 2}) {
    for (int i = 0; i < seqs[s].fps[1][2].size(); ++i) EXPECT_GE(seqs[s].fps[1][2].tag(i), 150);
  }
}

// Argument checks happen on the host before any CUDA call, so they run (and
// must pass) without a GPU.
TEST(CudaBeaconObserveTest, RejectsBadArgumentsWithoutLaunching) {
  BeaconDims d;
  d.n_layers = 2, d.n_heads = 4, d.n_kv_heads = 2, d.head_dim = 64;
  d.recent = 8, d.beacons = 16, d.fps_bound = 64;
  auto* e = reinterpret_cast<const BeaconObserveEntry*>(uintptr_t{256});  // never dereferenced
  auto* q = reinterpret_cast<const float*>(uintptr_t{256});
  auto* p = reinterpret_cast<const int32_t*>(uintptr_t{256});
  EXPECT_EQ(LaunchBeaconObserve(d, 2, e, 1, 1, q, p, nullptr), cudaErrorInvalidValue);  // layer
  EXPECT_EQ(LaunchBeaconObserve(d, 0, nullptr, 1, 1, q, p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconObserve(d, 0, e, 1, 1, nullptr, p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconObserve(d, 0, e, -1, 1, q, p, nullptr), cudaErrorInvalidValue);
  BeaconDims bad = d;
  bad.fps_bound = bad.beacons;  // U must exceed K
  EXPECT_EQ(LaunchBeaconObserve(bad, 0, e, 1, 1, q, p, nullptr), cudaErrorInvalidValue);
  bad = d;
  bad.head_dim = 63;
  EXPECT_EQ(LaunchBeaconObserve(bad, 0, e, 1, 1, q, p, nullptr), cudaErrorInvalidValue);
  bad = d;
  bad.n_kv_heads = 3;  // does not divide n_heads
  EXPECT_EQ(LaunchBeaconObserve(bad, 0, e, 1, 1, q, p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconObserveLayers(d, 1, 2, e, 1, 1, q, 0, p, nullptr), cudaErrorInvalidValue);  // past the last
  EXPECT_EQ(LaunchBeaconObserveLayers(d, 0, 0, e, 1, 1, q, 0, p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconObserveLayers(d, 0, 2, e, 1, 1, q, -1, p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconObserve(d, 0, e, 0, 1, q, p, nullptr), cudaSuccess);  // nothing to do
  EXPECT_EQ(LaunchBeaconObserve(d, 0, e, 3, 0, q, p, nullptr), cudaSuccess);

  const BeaconStateLayout lay = BeaconStateLayout::For(d);
  for (size_t off : {lay.ring, lay.ring_pos, lay.fps_pts, lay.fps_inv, lay.fps_tag, lay.fps_size}) {
    EXPECT_EQ(off % 256, 0u);
  }
  EXPECT_GE(lay.fps_size, lay.fps_tag + 2 * 4 * 64 * sizeof(int32_t));
  EXPECT_GE(lay.total_bytes, lay.fps_size + 2 * 4 * sizeof(int32_t));
}

}  // namespace
}  // namespace beacon
