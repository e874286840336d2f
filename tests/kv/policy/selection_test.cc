// SelectKeep: protection rules, tie-breaking, and the exact kept set against a
// naive full sort.
#include "kv/policy/selection.h"

#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// A one-layer sequence whose slots sit at the given positions.
kvtest::TestSequence MakeSequence(const std::vector<int32_t>& positions, std::mt19937& rng) {
  PolicyModelInfo m = kvtest::SmallModel();
  m.n_layers = 1;
  kvtest::TestSequence seq(m, 4, 64);
  seq.Append(positions, rng);
  return seq;
}

std::vector<int32_t> Range(int32_t lo, int32_t hi) {
  std::vector<int32_t> r(hi - lo);
  std::iota(r.begin(), r.end(), lo);
  return r;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SelectKeep, ProtectsPromptSinksAndWindowWhateverTheirScores) {
  std::mt19937 rng(1);
  kvtest::TestSequence seq = MakeSequence(Range(0, 40), rng);
  // Protected slots score lowest; the middle scores rise with the slot.
  std::vector<float> scores(40);
  for (int s = 0; s < 40; ++s) scores[s] = static_cast<float>(s);
  for (int s = 0; s < 10; ++s) scores[s] = -100.0f;   // prompt
  for (int s = 35; s < 40; ++s) scores[s] = -100.0f;  // window
  scores[12] = 1000.0f;                               // one heavy hitter
  Protection p;
  p.prompt_len = 10;
  p.keep_prompt = true;
  p.sinks = 2;
  p.window = 5;
  std::vector<int32_t> keep;
  SelectKeep(scores.data(), seq.keys(0), 0, p, 20, &keep);
  // 10 prompt + 5 window + slot 12 + the 4 best of the rest (31..34).
  EXPECT_THAT(keep, ElementsAreArray(Concat(Concat(Range(0, 10), {12}), Range(31, 40))));

  // Without keep_prompt only the sinks of the prompt survive.
  p.keep_prompt = false;
  SelectKeep(scores.data(), seq.keys(0), 0, p, 20, &keep);
  EXPECT_THAT(keep, ElementsAreArray(Concat(Concat({0, 1, 12}, Range(23, 35)), Range(35, 40))));
}

TEST(SelectKeep, ProtectionIsByPositionForPromptAndSinksBySlotForWindow) {
  std::mt19937 rng(2);
  // After earlier evictions: positions with gaps. Prompt = positions < 7.
  const std::vector<int32_t> pos = {0, 1, 3, 6, 9, 10, 14, 20, 21, 30, 31, 32};
  kvtest::TestSequence seq = MakeSequence(pos, rng);
  std::vector<float> scores(pos.size(), 0.0f);
  scores[5] = 1.0f;  // position 10
  Protection p{.prompt_len = 7, .keep_prompt = true, .sinks = 2, .window = 2};
  std::vector<int32_t> keep;
  SelectKeep(scores.data(), seq.keys(0), 0, p, 7, &keep);
  EXPECT_THAT(keep, ElementsAre(0, 1, 2, 3, 5, 10, 11));
  p.keep_prompt = false;  // sinks: positions 0, 1; then slot 5, then ties to the latest
  SelectKeep(scores.data(), seq.keys(0), 0, p, 7, &keep);
  EXPECT_THAT(keep, ElementsAre(0, 1, 5, 8, 9, 10, 11));
}

TEST(SelectKeep, TiesGoToTheLaterSlot) {
  std::mt19937 rng(3);
  kvtest::TestSequence seq = MakeSequence(Range(0, 30), rng);
  const std::vector<float> scores(30, 0.5f);
  Protection p{.prompt_len = 0, .keep_prompt = true, .sinks = 3, .window = 4};
  std::vector<int32_t> keep;
  SelectKeep(scores.data(), seq.keys(0), 0, p, 12, &keep);
  EXPECT_THAT(keep, ElementsAreArray(Concat(Range(0, 3), Range(21, 30))));
}

TEST(SelectKeep, TooMuchProtectedKeepsTheEarliest) {
  std::mt19937 rng(4);
  kvtest::TestSequence seq = MakeSequence(Range(0, 20), rng);
  const std::vector<float> scores(20, 0.0f);
  Protection p{.prompt_len = 15, .keep_prompt = true, .sinks = 0, .window = 3};
  std::vector<int32_t> keep;
  SelectKeep(scores.data(), seq.keys(0), 0, p, 10, &keep);
  EXPECT_THAT(keep, ElementsAreArray(Range(0, 10)));
}

// Thousands of random cases: positions with gaps, quantised scores (many
// ties), random protection and keep counts, every KV head.
TEST(SelectKeep, ExactSetMatchesNaiveSort) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    const int32_t n = 1 + static_cast<int32_t>(rng() % 100);
    const std::vector<int32_t> pos = kvtest::AscendingPositions(n, 1 + static_cast<int>(rng() % 4), rng);
    kvtest::TestSequence seq = MakeSequence(pos, rng);
    const int levels = 1 + static_cast<int>(rng() % 20);
    std::vector<float> scores(n);
    std::vector<double> dscores(n);
    for (int32_t s = 0; s < n; ++s) dscores[s] = scores[s] = static_cast<float>(rng() % levels) / levels;
    kvtest::NaiveProtection np;
    np.prompt_len = static_cast<int32_t>(rng() % (pos.back() + 2));
    np.keep_prompt = rng() % 2;
    np.sinks = static_cast<int32_t>(rng() % 6);
    np.window = static_cast<int32_t>(rng() % 10);
    const Protection p{np.prompt_len, np.keep_prompt, np.sinks, np.window};
    const int32_t n_keep = 1 + static_cast<int32_t>(rng() % n);
    std::vector<int32_t> keep;
    SelectKeep(scores.data(), seq.keys(0), static_cast<int>(trial % 2), p, n_keep, &keep);
    ASSERT_EQ(keep, kvtest::NaiveKeep(dscores, pos, np, n_keep))
        << "trial " << trial << " n=" << n << " keep=" << n_keep << " prompt=" << np.prompt_len
        << " keep_prompt=" << np.keep_prompt << " sinks=" << np.sinks << " window=" << np.window;
  }
}

}  // namespace
}  // namespace beacon
