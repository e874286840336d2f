// Farthest-point sampling and the continual FPS buffer against the naive
// references of beacon_test_util.h.
#include "kv/policy/fps.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/beacon_fps_phase.h"
#include "tests/kv/beacon_test_util.h"

namespace beacon {
namespace {

using beacon_test::RandomVec;
using beacon_test::RefContinual;
using beacon_test::RefFps;
using beacon_test::Vec;

// Runs the library FPS on double-held (float-exact) points.
std::vector<int> LibFps(const std::vector<Vec>& points, int k) {
  const int n = static_cast<int>(points.size()), dim = static_cast<int>(points[0].size());
  std::vector<float> flat;
  std::vector<double> inv;
  for (const Vec& p : points) {
    double n2 = 0.0;
    for (double x : p) {
      flat.push_back(static_cast<float>(x));
      n2 += x * x;
    }
    inv.push_back(1.0 / std::sqrt(n2));
  }
  std::vector<int> chosen;
  FpsScratch scratch;
  FarthestPointSample(flat.data(), inv.data(), n, dim, k, &chosen, &scratch);
  return chosen;
}

// Random points of random norms (FPS must see directions only).
std::vector<Vec> RandomPoints(std::mt19937& rng, int n, int dim) {
  std::uniform_real_distribution<double> norm(0.05, 20.0);
  std::vector<Vec> pts;
  for (int i = 0; i < n; ++i) pts.push_back(RandomVec(rng, dim, norm(rng)));
  return pts;
}

TEST(FarthestPointSample, MatchesNaiveReferenceOnRandomPoints) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 60; ++trial) {
    const int dim = 2 + trial % 15;
    const int n = 1 + static_cast<int>(rng() % 80);
    const int k = 1 + static_cast<int>(rng() % (n + 3));  // includes k >= n
    const std::vector<Vec> pts = RandomPoints(rng, n, dim);
    const std::vector<int> want = RefFps(pts, k);
    ASSERT_EQ(static_cast<int>(want.size()), std::min(n, k));
    EXPECT_EQ(LibFps(pts, k), want) << "trial " << trial << " n=" << n << " k=" << k << " dim=" << dim;
  }
}

// Point 0 sits in the main cluster; point 2 is the largest (so the farthest
// from the mean in Euclidean terms) but points the same way; point 6 is the
// one pointing away from the mean direction and must come first.
TEST(FarthestPointSample, FirstPointIsLeastSimilarToTheMeanNotIndexZero) {
  std::vector<Vec> pts = {
      {1.0, 0.1, 0.0, 0.0},  {1.0, -0.1, 0.05, 0.0}, {100.0, 0.0, 0.0, 0.0}, {0.9, 0.0, 0.1, 0.1},
      {1.0, 0.0, -0.1, 0.0}, {1.1, 0.05, 0.0, -0.1}, {-0.5, 1.0, 0.0, 0.0},  {1.0, 0.0, 0.0, 0.2},
  };
  const std::vector<int> got = LibFps(pts, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], 6);
  EXPECT_EQ(got, RefFps(pts, 3));
}

// Exact ties break to the lowest index: unit axes where e2 and -e2 tie for
// the least similar to the mean (e1 + e3) and, later, e1 and e3 tie at
// distance 1 from {e2, -e2}.
TEST(FarthestPointSample, TiesGoToTheLowestIndex) {
  const std::vector<Vec> pts = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0, -1, 0}};
  EXPECT_EQ(LibFps(pts, 4), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(RefFps(pts, 4), (std::vector<int>{1, 3, 0, 2}));
  // Identical points: every comparison ties; lowest indices.
  const std::vector<Vec> same = {{1, 1}, {1, 1}, {1, 1}, {1, 1}};
  EXPECT_EQ(LibFps(same, 3), (std::vector<int>{0, 1, 2}));
}

// The buffer, point for point, against a naive simulation: it shrinks exactly
// when it reaches U, to K points in arrival order, then refills; the
// survivors are the naive FPS choice; originals and tags are kept bitwise.
// With a phase, the first shrink comes at bound - phase and the later ones
// at bound.
TEST(ContinualFps, MatchesNaiveSimulationAndShrinksExactlyAtBound) {
  for (auto [dim, bound, keep, phase] :
       {std::tuple{8, 64, 16, 0}, std::tuple{5, 10, 3, 0}, std::tuple{16, 17, 16, 0}, std::tuple{8, 64, 16, 47},
        std::tuple{8, 64, 16, 20}, std::tuple{5, 10, 3, 4}}) {
    std::mt19937 rng(dim * 100 + bound + phase);
    ContinualFps fps(dim, bound, keep, phase);
    ASSERT_EQ(fps.shrink_size(), bound - phase);
    RefContinual ref{bound, keep, phase};
    int expected_size = 0;
    std::vector<int> lib_beacons;
    for (int t = 0; t < 5 * bound + 7; ++t) {
      const Vec q = RandomVec(rng, dim, 0.1 + (t % 7));
      const std::vector<float> qf = beacon_test::ToFloats(q);
      const int shrink_at = fps.shrinks() == 0 ? bound - phase : bound;
      ASSERT_EQ(fps.shrink_size(), shrink_at);
      ASSERT_TRUE(fps.Add(qf.data(), 1000 + t));
      ref.Add(q, 1000 + t);
      expected_size = expected_size + 1 == shrink_at ? keep : expected_size + 1;
      ASSERT_EQ(fps.size(), expected_size) << "t=" << t;
      ASSERT_EQ(fps.size(), static_cast<int>(ref.points.size()));
      ASSERT_EQ(fps.shrinks(), ref.shrinks);
      for (int i = 0; i < fps.size(); ++i) {
        ASSERT_EQ(fps.tag(i), ref.tags[i]) << "t=" << t << " i=" << i;
        for (int c = 0; c < dim; ++c) ASSERT_EQ(fps.point(i)[c], static_cast<float>(ref.points[i][c]));
      }
      // Beacons: FPS over the buffer as it stands.
      fps.Beacons(&lib_beacons);
      const std::vector<Vec> want = ref.Beacons();
      ASSERT_EQ(lib_beacons.size(), want.size());
      for (size_t b = 0; b < want.size(); ++b) {
        for (int c = 0; c < dim; ++c) ASSERT_EQ(fps.point(lib_beacons[b])[c], static_cast<float>(want[b][c]));
      }
    }
    EXPECT_EQ(fps.shrinks(), 1 + (5 * bound + 7 - (bound - phase)) / (bound - keep));
    EXPECT_EQ(fps.shrink_size(), bound);
  }
}

// BeaconKV's buffers under beacon_filter=all: n_layers * n_heads buffers,
// phased by BeaconFpsPhase as BeaconPolicy builds them, admit every token
// in lockstep. No token may shrink more than ceil(N / (U - K)) of them
// (before issue 32 all N shrank on one token in U - K), buffer i's first
// shrink comes at its (U - phase_i)-th point, with phase_i =
// floor(i * (U - K) / N), and each later one U - K points after the last.
TEST(ContinualFps, BeaconPhasesSpreadTheShrinksEvenlyOverTokens) {
  struct Shape {
    int layers, heads, bound, keep;
  };
  // The default model's 30 x 9 at the defaults; a 28 x 12 head-dim-128
  // model; fewer buffers than the period; a period that does not divide N.
  for (const Shape& sh : {Shape{30, 9, 64, 16}, Shape{28, 12, 64, 16}, Shape{3, 8, 64, 16}, Shape{4, 5, 10, 3}}) {
    const int n = sh.layers * sh.heads, period = sh.bound - sh.keep, dim = 4;
    const int most = (n + period - 1) / period;
    std::vector<ContinualFps> bufs;
    for (int i = 0; i < n; ++i) {
      const int phase = BeaconFpsPhase(i, n, sh.bound, sh.keep);
      ASSERT_EQ(phase, beacon_test::RefPhase(i, n, sh.bound, sh.keep));
      ASSERT_GE(phase, 0);
      ASSERT_LT(phase, period);
      bufs.emplace_back(dim, sh.bound, sh.keep, phase);
    }
    std::mt19937 rng(n);
    std::vector<int> phase_used(period, 0);
    int busiest = 0;
    for (int t = 1; t <= 6 * sh.bound; ++t) {  // t: the points each buffer holds after this token
      int shrinks = 0;
      for (int i = 0; i < n; ++i) {
        const int64_t before = bufs[i].shrinks();
        const std::vector<float> q = beacon_test::ToFloats(RandomVec(rng, dim, 1.0));
        ASSERT_TRUE(bufs[i].Add(q.data(), t));
        if (bufs[i].shrinks() == before) continue;
        ++shrinks;
        const int first = sh.bound - bufs[i].phase();
        ASSERT_GE(t, first) << "buffer " << i;
        ASSERT_EQ((t - first) % period, 0) << "buffer " << i << " shrank off its period at token " << t;
        ASSERT_EQ(bufs[i].shrinks(), 1 + (t - first) / period);
        if (t == first) ++phase_used[bufs[i].phase()];
      }
      busiest = std::max(busiest, shrinks);
      ASSERT_LE(shrinks, most) << "token " << t << ", " << sh.layers << " x " << sh.heads;
    }
    EXPECT_EQ(busiest, most) << "the bound is met, not beaten: N shrinks over U - K tokens";
    // Every buffer shrank, and the phases are spread: each value is used by
    // floor(N / P) or ceil(N / P) buffers when N >= P, at most once otherwise.
    for (int i = 0; i < n; ++i) EXPECT_GE(bufs[i].shrinks(), 5);
    for (int p = 0; p < period; ++p) {
      EXPECT_LE(phase_used[p], most);
      if (n >= period) {
        EXPECT_GE(phase_used[p], n / period) << "phase " << p;
      }
    }
  }
}

TEST(ContinualFps, BeaconsBeforeTheBufferExceedsKeepAreAllPoints) {
  ContinualFps fps(3, 8, 4);
  const float a[3] = {1, 0, 0}, b[3] = {0, 2, 0};
  fps.Add(a, 7);
  fps.Add(b, 9);
  std::vector<int> idx;
  fps.Beacons(&idx);
  EXPECT_EQ(idx, (std::vector<int>{0, 1}));
}

TEST(ContinualFps, RefusesDirectionlessQueries) {
  ContinualFps fps(3, 8, 4);
  const float zero[3] = {0, 0, 0}, nan[3] = {NAN, 1, 0}, inf[3] = {INFINITY, 0, 0}, ok[3] = {0, 0, 1e-20f};
  EXPECT_FALSE(fps.Add(zero, 0));
  EXPECT_FALSE(fps.Add(nan, 1));
  EXPECT_FALSE(fps.Add(inf, 2));
  EXPECT_EQ(fps.size(), 0);
  EXPECT_TRUE(fps.Add(ok, 3));  // tiny but a direction
  EXPECT_EQ(fps.size(), 1);
}

}  // namespace
}  // namespace beacon
