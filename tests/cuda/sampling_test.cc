#include "kernels/cuda/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

DeviceSamplingParams Params(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f, uint64_t seed = 0,
                            uint64_t step = 0) {
  DeviceSamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  p.step = step;
  return p;
}

std::string Describe(const DeviceSamplingParams& p) {
  return "T=" + std::to_string(p.temperature) + " k=" + std::to_string(p.top_k) + " p=" + std::to_string(p.top_p) +
         " min_p=" + std::to_string(p.min_p);
}

// engine/sampler.cc's Sample() without penalties, written out naively with
// full sorts: the probability with which each token is drawn (exactly 1 at
// the argmax when greedy). A token the CPU sampler can never return has 0.
std::vector<double> CpuProbabilities(const float* logits, int n, const DeviceSamplingParams& p) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::isnan(logits[i]) ? -kInf : logits[i];
  std::vector<double> prob(n, 0.0);
  if (!(p.temperature > 0.0f)) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
      if (x[i] > x[best]) best = i;
    }
    prob[best] = 1.0;
    return prob;
  }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  const int count = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  idx.resize(count);
  const float max_logit = x[idx[0]];
  const float inv_t = 1.0f / p.temperature;
  std::vector<float> w(n, 0.0f);
  double total = 0.0;
  for (int t : idx) {
    w[t] = x[t] == max_logit ? 1.0f : std::exp((x[t] - max_logit) * inv_t);
    total += w[t];
  }
  int keep = count;
  if (p.top_p < 1.0f) {
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
    const double target = static_cast<double>(p.top_p) * total;
    double cum = 0.0;
    keep = 0;
    for (int i = 0; i < count && keep == 0; ++i) {
      cum += w[idx[i]];
      if (cum >= target) keep = i + 1;
    }
    if (keep == 0) keep = count;
  }
  idx.resize(keep);
  if (p.min_p > 0.0f) {
    std::vector<int> kept;
    for (int t : idx) {
      if (w[t] >= p.min_p) kept.push_back(t);
    }
    idx = kept;
  }
  double kept_total = 0.0;
  for (int t : idx) kept_total += w[t];
  for (int t : idx) prob[t] = w[t] / kept_total;
  return prob;
}

std::vector<float> RandomLogits(size_t n, uint64_t seed, float stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// `rows` copies of one row of logits.
std::vector<float> Repeat(const std::vector<float>& row, int rows) {
  std::vector<float> out;
  out.reserve(row.size() * rows);
  for (int r = 0; r < rows; ++r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

// Runs LaunchSample (LaunchArgmax when `params` is null) with the output
// poisoned (0xFF bytes: token -1), checks every token is in [0, vocab).
// `offset` shifts the logits by that many floats (misaligned rows).
void RunKernel(const std::vector<float>& logits, int vocab, const std::vector<DeviceSamplingParams>* params,
               std::vector<int32_t>* tokens, int offset = 0) {
  const int64_t rows = static_cast<int64_t>(logits.size() / vocab);
  std::vector<float> padded(offset, 0.0f);
  padded.insert(padded.end(), logits.begin(), logits.end());
  DeviceBuffer<float> dlogits(padded.size());
  DeviceBuffer<int32_t> dout(rows);
  BEACON_CUDA_ASSERT_OK(dlogits.Upload(padded));
  BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
  if (params == nullptr) {
    BEACON_CUDA_ASSERT_OK(LaunchArgmax(dlogits.get() + offset, rows, vocab, dout.get(), nullptr));
  } else {
    ASSERT_EQ(params->size(), static_cast<size_t>(rows));
    DeviceBuffer<DeviceSamplingParams> dparams(rows);
    BEACON_CUDA_ASSERT_OK(dparams.Upload(*params));
    const size_t ws_bytes = SamplingWorkspaceBytes(rows, vocab);
    DeviceBuffer<uint8_t> ws(ws_bytes);
    BEACON_CUDA_ASSERT_OK(
        LaunchSample(dlogits.get() + offset, rows, vocab, dparams.get(), dout.get(), ws.get(), ws_bytes, nullptr));
  }
  BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
  BEACON_CUDA_ASSERT_OK(dout.Download(tokens));
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE((*tokens)[r] >= 0 && (*tokens)[r] < vocab) << "row " << r << " token " << (*tokens)[r];
  }
}

// `draws` rows of the same logits and params, steps 0..draws-1.
void Draw(const std::vector<float>& row, const DeviceSamplingParams& p, int draws, std::vector<int32_t>* tokens) {
  std::vector<DeviceSamplingParams> params(draws, p);
  for (int i = 0; i < draws; ++i) params[i].step = p.step + i;
  RunKernel(Repeat(row, draws), static_cast<int>(row.size()), &params, tokens);
}

// Rows that stress ties and non-finite values; `vocab` >= 4.
std::vector<std::vector<float>> SpecialRows(int vocab, uint64_t seed) {
  std::vector<std::vector<float>> rows;
  auto tie = RandomLogits(vocab, seed, 2.0f);  // the max twice, far apart
  tie[vocab / 3] = tie[vocab - 1] = 50.0f;
  rows.push_back(tie);
  auto masked = RandomLogits(vocab, seed + 1, 2.0f);  // NaN / -inf everywhere but a few
  for (int i = 0; i < vocab; ++i) masked[i] = i % 3 == 0 ? kNaN : (i % 3 == 1 ? -kInf : masked[i]);
  masked[vocab - 1] = kNaN;
  rows.push_back(masked);
  rows.push_back(std::vector<float>(vocab, -kInf));  // all masked: token 0
  std::vector<float> zeros(vocab, -1.0f);            // -0 and +0 tie: lower id wins
  zeros[vocab / 2] = -0.0f;
  zeros[vocab - 2] = 0.0f;
  rows.push_back(zeros);
  std::vector<float> flat(vocab, 3.0f);  // all equal: token 0
  rows.push_back(flat);
  return rows;
}

TEST(CudaSamplingTest, GreedyMatchesCpuArgmaxWithTies) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1;
  for (int vocab : {1, 7, 256, 1000, 4099, 151936}) {
    std::vector<float> logits = RandomLogits(static_cast<size_t>(vocab) * 3, seed++, 3.0f);
    if (vocab >= 4) {
      for (const auto& row : SpecialRows(vocab, seed++)) {
        logits.insert(logits.end(), row.begin(), row.end());
      }
    }
    const int rows = static_cast<int>(logits.size() / vocab);
    std::vector<int32_t> want(rows);
    for (int r = 0; r < rows; ++r) {
      const auto prob = CpuProbabilities(&logits[static_cast<size_t>(r) * vocab], vocab, Params(0.0f));
      want[r] = static_cast<int32_t>(std::max_element(prob.begin(), prob.end()) - prob.begin());
    }
    // Greedy rows in LaunchSample: temperature 0, negative and NaN, other
    // filters set (they must be ignored).
    std::vector<DeviceSamplingParams> params(rows, Params(0.0f, 5, 0.5f, 0.2f, 9, 9));
    for (int r = 0; r < rows; ++r) {
      params[r].temperature = r % 3 == 0 ? 0.0f : (r % 3 == 1 ? -1.0f : kNaN);
    }
    for (int offset : {0, 1}) {  // 1: rows not 16-byte aligned (scalar loads)
      std::vector<int32_t> got;
      ASSERT_NO_FATAL_FAILURE(RunKernel(logits, vocab, nullptr, &got, offset));
      EXPECT_EQ(got, want) << "LaunchArgmax vocab " << vocab << " offset " << offset;
      ASSERT_NO_FATAL_FAILURE(RunKernel(logits, vocab, &params, &got, offset));
      EXPECT_EQ(got, want) << "LaunchSample greedy vocab " << vocab << " offset " << offset;
    }
  }
}

// Filter combinations: each alone, all three, and temperatures below and
// above 1. top_k / top_p are chosen to bind on the rows used with them.
std::vector<DeviceSamplingParams> Combos(int top_k) {
  return {Params(1.0f, top_k),
          Params(1.0f, 0, 0.8f),
          Params(1.0f, 0, 1.0f, 0.1f),
          Params(0.7f, top_k, 0.8f, 0.05f),
          Params(1.3f, top_k, 0.8f, 0.05f),
          Params(0.7f),
          Params(1.3f, 0, 0.95f)};
}

// Every sampled token has a positive probability under the CPU sampler's
// filters. Exact: no tolerance (a boundary within float rounding of the
// top-p target would be needed to differ, and the rows are fixed).
TEST(CudaSamplingTest, SamplesStayInTheCpuKeptSet) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 100;
  for (int vocab : {50, 1000, 151936}) {
    const int draws = vocab > 10000 ? 48 : 512;
    std::vector<std::vector<float>> rows = {RandomLogits(vocab, seed++, 2.0f), RandomLogits(vocab, seed++, 4.0f)};
    auto masked = RandomLogits(vocab, seed++, 2.0f);  // half -inf / NaN: never drawn
    for (int i = 0; i < vocab; i += 2) masked[i] = i % 4 == 0 ? -kInf : kNaN;
    rows.push_back(masked);
    for (const auto& row : rows) {
      for (DeviceSamplingParams p : Combos(vocab > 100 ? 40 : 8)) {
        p.seed = seed++;
        const auto prob = CpuProbabilities(row.data(), vocab, p);
        std::vector<int32_t> got;
        ASSERT_NO_FATAL_FAILURE(Draw(row, p, draws, &got));
        int outside = 0;
        for (int32_t t : got) outside += prob[t] > 0.0 ? 0 : 1;
        EXPECT_EQ(outside, 0) << Describe(p) << " vocab " << vocab;
      }
    }
  }
}

// Empirical frequencies over N draws against the filtered, renormalised
// softmax. Tolerance: each count is Binomial(N, p), so |freq - p| <= 5 sigma
// with sigma = sqrt(p (1 - p) / N), plus 1e-3 for the fp32 weights (expf vs
// std::exp, a few ulps) and the 2^-F quantisation; a wrong filter, a wrong
// temperature or a biased draw moves a frequency by far more.
TEST(CudaSamplingTest, FrequenciesMatchTheFilteredSoftmax) {
  BEACON_REQUIRE_CUDA_DEVICE();
  constexpr int kDraws = 20000;
  uint64_t seed = 200;
  for (int vocab : {16, 40, 64}) {
    std::vector<std::vector<float>> rows = {RandomLogits(vocab, seed++, 1.5f)};
    std::mt19937_64 rng(seed++);  // ties everywhere: logits on a grid of 4 values
    std::vector<float> grid(vocab);
    for (float& x : grid) x = 0.5f * static_cast<float>(rng() % 4);
    rows.push_back(grid);
    for (const auto& row : rows) {
      for (DeviceSamplingParams p : Combos(vocab / 4 + 1)) {
        p.seed = seed++;
        const auto prob = CpuProbabilities(row.data(), vocab, p);
        std::vector<int32_t> got;
        ASSERT_NO_FATAL_FAILURE(Draw(row, p, kDraws, &got));
        std::vector<int> count(vocab, 0);
        for (int32_t t : got) ++count[t];
        for (int t = 0; t < vocab; ++t) {
          const double freq = static_cast<double>(count[t]) / kDraws;
          const double sigma = std::sqrt(prob[t] * (1.0 - prob[t]) / kDraws);
          EXPECT_LE(std::abs(freq - prob[t]), 5.0 * sigma + 1e-3)
              << Describe(p) << " vocab " << vocab << " token " << t << " freq " << freq << " want " << prob[t];
        }
      }
    }
  }
}

// The draw contract of the header, row by row in one heterogeneous batch
// (greedy rows, each filter combination, different seeds and steps): the
// token is where u = bits / 2^64 falls in the token-order CDF of the kept
// probabilities. Rows whose u lies within 1e-5 of a CDF step are skipped: the
// GPU's weights differ from std::exp's by a few ulps and are quantised.
TEST(CudaSamplingTest, DrawIsTheDocumentedInverseCdf) {
  BEACON_REQUIRE_CUDA_DEVICE();
  constexpr int kVocab = 64, kRows = 2000;
  const auto logits = RandomLogits(static_cast<size_t>(kVocab) * kRows, 300, 2.0f);
  const auto combos = Combos(10);
  std::vector<DeviceSamplingParams> params(kRows);
  std::mt19937_64 rng(301);
  for (int r = 0; r < kRows; ++r) {
    params[r] = r % 10 == 9 ? Params(0.0f) : combos[r % combos.size()];
    params[r].seed = rng();
    params[r].step = rng() % 1000;
  }
  std::vector<int32_t> got;
  ASSERT_NO_FATAL_FAILURE(RunKernel(logits, kVocab, &params, &got));
  int checked = 0, wrong = 0;
  for (int r = 0; r < kRows; ++r) {
    const auto prob = CpuProbabilities(&logits[static_cast<size_t>(r) * kVocab], kVocab, params[r]);
    const double u = std::ldexp(static_cast<double>(SamplingRandomBits(params[r].seed, params[r].step)), -64);
    double cum = 0.0, margin = 1.0;
    int want = -1;
    for (int t = 0; t < kVocab; ++t) {
      if (prob[t] == 0.0) continue;
      cum += prob[t];
      margin = std::min(margin, std::abs(cum - u));
      if (want < 0 && cum > u) want = t;
    }
    if (params[r].temperature > 0.0f && margin < 1e-5) continue;
    ++checked;
    if (got[r] != want && ++wrong <= 5) {
      ADD_FAILURE() << "row " << r << " " << Describe(params[r]) << ": got " << got[r] << " want " << want;
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(checked, kRows * 9 / 10);
}

TEST(CudaSamplingTest, DeterministicPerSeedAndStepIndependentAcrossRows) {
  BEACON_REQUIRE_CUDA_DEVICE();
  constexpr int kVocab = 64, kSteps = 1000;
  const std::vector<float> flat(kVocab, 0.0f);  // uniform: p = 1/64 per token
  std::vector<int32_t> a, a_again, b;
  ASSERT_NO_FATAL_FAILURE(Draw(flat, Params(1.0f, 0, 1.0f, 0.0f, 11), kSteps, &a));
  ASSERT_NO_FATAL_FAILURE(Draw(flat, Params(1.0f, 0, 1.0f, 0.0f, 11), kSteps, &a_again));
  ASSERT_NO_FATAL_FAILURE(Draw(flat, Params(1.0f, 0, 1.0f, 0.0f, 12), kSteps, &b));
  EXPECT_EQ(a, a_again) << "same (seed, step) must give the same token";
  // Different steps draw afresh: all 64 tokens appear (a token is missing
  // with probability (63/64)^1000 < 2e-7), and repeats of the previous step
  // stay near 1/64 (bound 5%).
  EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()).size(), static_cast<size_t>(kVocab));
  int repeats = 0, same_as_b = 0;
  for (int i = 0; i < kSteps; ++i) {
    repeats += i > 0 && a[i] == a[i - 1];
    same_as_b += a[i] == b[i];
  }
  EXPECT_LE(repeats, kSteps / 20);
  EXPECT_LE(same_as_b, kSteps / 20) << "seeds 11 and 12 must give independent streams";
  // Batch position does not matter: step s of seed 11 at row 0 of a batch of
  // other requests gives a[s].
  const auto other = RandomLogits(kVocab * 7, 400, 2.0f);
  std::vector<float> logits = Repeat(flat, 1);
  logits.insert(logits.end(), other.begin(), other.end());
  std::vector<DeviceSamplingParams> params(8, Params(0.9f, 5, 0.9f, 0.0f, 77, 3));
  params[0] = Params(1.0f, 0, 1.0f, 0.0f, 11, 123);
  std::vector<int32_t> got;
  ASSERT_NO_FATAL_FAILURE(RunKernel(logits, kVocab, &params, &got));
  EXPECT_EQ(got[0], a[123]);
}

TEST(CudaSamplingTest, EdgeCases) {
  BEACON_REQUIRE_CUDA_DEVICE();
  constexpr int kVocab = 48, kDraws = 2000;
  auto row = RandomLogits(kVocab, 500, 2.0f);
  row[7] = row[30] = 20.0f;  // a tied maximum
  std::vector<int32_t> ref, got;
  // top_k >= vocab is off: the very same draws as top_k = 0.
  ASSERT_NO_FATAL_FAILURE(Draw(row, Params(1.0f, 0, 1.0f, 0.0f, 5), kDraws, &ref));
  for (int k : {kVocab, kVocab + 1, 1 << 30}) {
    ASSERT_NO_FATAL_FAILURE(Draw(row, Params(1.0f, k, 1.0f, 0.0f, 5), kDraws, &got));
    EXPECT_EQ(got, ref) << "top_k " << k;
  }
  // A tiny top_p and top_k = 1 keep the single best token (lower id of a tie).
  for (const auto& p : {Params(1.0f, 0, 1e-6f, 0.0f, 6), Params(1.0f, 1, 1.0f, 0.0f, 6)}) {
    ASSERT_NO_FATAL_FAILURE(Draw(row, p, 200, &got));
    EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), std::set<int32_t>{7}) << Describe(p);
  }
  // A tiny temperature leaves only the tied maxima (weight exp(-12000) == 0
  // for the rest), both drawn (each missing with probability 2^-200).
  ASSERT_NO_FATAL_FAILURE(Draw(row, Params(1e-3f, 0, 1.0f, 0.0f, 6), 200, &got));
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), (std::set<int32_t>{7, 30}));
  // min_p = 1 keeps every token tied at the maximum: both, about half each
  // (Binomial(2000, 1/2), 5 sigma = 112).
  ASSERT_NO_FATAL_FAILURE(Draw(row, Params(1.0f, 0, 1.0f, 1.0f, 7), kDraws, &got));
  const auto sevens = std::count(got.begin(), got.end(), 7);
  EXPECT_EQ(sevens + std::count(got.begin(), got.end(), 30), kDraws);
  EXPECT_NEAR(sevens, kDraws / 2, 112);
  // All equal logits, top_p = 0.5: the 24 lowest ids, uniformly (a tie group
  // cut by id; Binomial(2000, 1/24), 5 sigma = 45).
  ASSERT_NO_FATAL_FAILURE(Draw(std::vector<float>(kVocab, 1.0f), Params(1.0f, 0, 0.5f, 0.0f, 8), kDraws, &got));
  std::vector<int> count(kVocab, 0);
  for (int32_t t : got) ++count[t];
  for (int t = 0; t < kVocab; ++t) {
    if (t < kVocab / 2) {
      EXPECT_NEAR(count[t], kDraws / 24.0, 45) << "token " << t;
    } else {
      EXPECT_EQ(count[t], 0) << "token " << t;
    }
  }
  // A single +inf logit always wins; an all -inf row draws uniformly among
  // the top-k candidates (the lowest ids), as the CPU sampler does.
  auto inf_row = row;
  inf_row[41] = kInf;
  ASSERT_NO_FATAL_FAILURE(Draw(inf_row, Params(1.0f, 0, 0.9f, 0.0f, 9), 200, &got));
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), std::set<int32_t>{41});
  ASSERT_NO_FATAL_FAILURE(Draw(std::vector<float>(kVocab, -kInf), Params(1.0f, 3, 1.0f, 0.0f, 10), 300, &got));
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), (std::set<int32_t>{0, 1, 2}));
  // top_k beyond the finite logits: the -inf candidates are never drawn.
  std::vector<float> few(kVocab, -kInf);
  few[3] = 1.0f;
  few[44] = 1.5f;
  few[20] = kNaN;
  ASSERT_NO_FATAL_FAILURE(Draw(few, Params(1.0f, 10, 1.0f, 0.0f, 11), 300, &got));
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), (std::set<int32_t>{3, 44}));
}

// Capturable: a graph of the launch replays to the same tokens as a direct
// launch (no allocation or synchronisation inside the launcher).
TEST(CudaSamplingTest, GraphCaptureReplaysTheSameDraws) {
  BEACON_REQUIRE_CUDA_DEVICE();
  constexpr int kVocab = 1000, kRows = 16;
  const auto logits = RandomLogits(static_cast<size_t>(kVocab) * kRows, 600, 2.0f);
  std::vector<DeviceSamplingParams> params(kRows, Params(0.8f, 50, 0.9f, 0.02f, 3, 4));
  for (int r = 0; r < kRows; ++r) params[r].seed = r;
  std::vector<int32_t> want, got;
  ASSERT_NO_FATAL_FAILURE(RunKernel(logits, kVocab, &params, &want));
  DeviceBuffer<float> dlogits(logits.size());
  DeviceBuffer<DeviceSamplingParams> dparams(kRows);
  DeviceBuffer<int32_t> dout(kRows);
  BEACON_CUDA_ASSERT_OK(dlogits.Upload(logits));
  BEACON_CUDA_ASSERT_OK(dparams.Upload(params));
  BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
  cudaStream_t stream;
  BEACON_CUDA_ASSERT_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  BEACON_CUDA_ASSERT_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const cudaError_t launch = LaunchSample(dlogits.get(), kRows, kVocab, dparams.get(), dout.get(), nullptr,
                                          SamplingWorkspaceBytes(kRows, kVocab), stream);
  BEACON_CUDA_ASSERT_OK(cudaStreamEndCapture(stream, &graph));
  BEACON_CUDA_ASSERT_OK(launch);
  cudaGraphExec_t exec;
  BEACON_CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  BEACON_CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream));
  BEACON_CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
  BEACON_CUDA_ASSERT_OK(dout.Download(&got));
  EXPECT_EQ(got, want);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Host-only: sizes, the RNG and argument checks need no device.
TEST(CudaSamplingTest, HostContractsWithoutDevice) {
  for (int64_t rows : {0, 1, 256}) {
    for (int vocab : {1, 256, 151936}) {
      EXPECT_EQ(SamplingWorkspaceBytes(rows, vocab), SamplingWorkspaceBytes(rows, vocab));
      EXPECT_LE(SamplingWorkspaceBytes(rows, vocab), SamplingWorkspaceBytes(rows + 1, vocab));
      const int f = SamplingMassFractionBits(vocab);
      EXPECT_GE(f, 32);  // vocab * 2^F must stay below 2^62
      EXPECT_LT(std::ldexp(static_cast<double>(vocab), f), std::ldexp(1.0, 62));
    }
  }
  EXPECT_EQ(SamplingWorkspaceBytes(0, 151936), 0u);
  std::set<uint64_t> bits;
  for (uint64_t step = 0; step < 10000; ++step) bits.insert(SamplingRandomBits(42, step));
  EXPECT_EQ(bits.size(), 10000u);
  EXPECT_NE(SamplingRandomBits(1, 0), SamplingRandomBits(2, 0));

  auto* logits = reinterpret_cast<const float*>(uintptr_t{256});  // never dereferenced
  auto* params = reinterpret_cast<const DeviceSamplingParams*>(uintptr_t{256});
  auto* out = reinterpret_cast<int32_t*>(uintptr_t{256});
  EXPECT_EQ(LaunchSample(nullptr, 1, 8, params, out, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSample(logits, 1, 8, nullptr, out, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSample(logits, 1, 8, params, nullptr, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSample(logits, -1, 8, params, out, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSample(logits, 1, 0, params, out, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchArgmax(logits, 1, -3, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchArgmax(logits, 1, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSample(logits, 0, 8, params, out, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(LaunchArgmax(logits, 0, 8, out, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace beacon
