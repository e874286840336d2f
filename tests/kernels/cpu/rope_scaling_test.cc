#include "kernels/cpu/rope_scaling.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"

namespace beacon {
namespace {

// head_dim 8, theta 10^4: the base frequencies are exactly 1, 0.1, 0.01,
// 0.001 (wavelengths 2 pi * 1, 10, 100, 1000), so every expected value below
// follows from the formulas by hand.
constexpr float kTheta = 10000.0f;
constexpr int kDim = 8;

TEST(RopeScaling, NoneIsTheUnscaledTable) {
  for (int d : {8, 64, 128}) {
    std::vector<float> want(d / 2);
    RopeInvFreq(500000.0f, d, want.data());
    const RopeTable t = MakeRopeTable(500000.0f, d);
    EXPECT_EQ(t.inv_freq, want) << d;  // bit-identical: default models keep their logits
    EXPECT_EQ(t.attention_factor, 1.0f);
  }
}

TEST(RopeScaling, LinearDividesEveryFrequency) {
  const RopeTable t = MakeRopeTable(kTheta, kDim, {.type = RopeScalingType::kLinear, .factor = 4.0f});
  const float want[] = {0.25f, 0.025f, 0.0025f, 0.00025f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(t.inv_freq[i], want[i]) << i;
  EXPECT_EQ(t.attention_factor, 1.0f);
}

TEST(RopeScaling, Llama3KeepsHighScalesLowAndBlendsTheMiddle) {
  // original context 1024, low/high frequency factors 1/4: wavelengths below
  // 1024 / 4 = 256 are kept (pairs 0, 1), above 1024 / 1 divided by the
  // factor (pair 3: 0.001 / 8); pair 2 (wavelength 200 pi = 628.3) blends
  // with s = (1024 / 628.3 - 1) / (4 - 1) = 0.2099155.
  const RopeScaling s{.type = RopeScalingType::kLlama3,
                      .factor = 8.0f,
                      .low_freq_factor = 1.0f,
                      .high_freq_factor = 4.0f,
                      .original_context = 1024};
  const RopeTable t = MakeRopeTable(kTheta, kDim, s);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(t.inv_freq[1], 0.1f);
  EXPECT_NEAR(t.inv_freq[2], 0.01 * ((1 - 0.20991554) / 8 + 0.20991554), 1e-9);  // 0.00308676
  EXPECT_NEAR(t.inv_freq[2], 0.003086761, 1e-9);
  EXPECT_FLOAT_EQ(t.inv_freq[3], 0.000125f);
  EXPECT_EQ(t.attention_factor, 1.0f);

  // Llama 3.1's own numbers (original 8192): only the slowest pair of a
  // head_dim 8 model is in the blend, s = (8192 / 6283.19 - 1) / 3.
  const RopeTable l31 = MakeRopeTable(kTheta, kDim,
                                      {.type = RopeScalingType::kLlama3,
                                       .factor = 8.0f,
                                       .low_freq_factor = 1.0f,
                                       .high_freq_factor = 4.0f,
                                       .original_context = 8192});
  EXPECT_FLOAT_EQ(l31.inv_freq[2], 0.01f);
  EXPECT_NEAR(l31.inv_freq[3], 0.000213607544, 1e-11);
}

TEST(RopeScaling, YarnRampsBetweenTheCorrectionDims) {
  // original context 64, beta 32 / 1: the correction dims are
  // 8 ln(64 / (2 pi 32)) / (2 ln 1e4) = -0.497 -> floor -1 -> clamp 0 and
  // 8 ln(64 / (2 pi)) / (2 ln 1e4) = 1.008 -> ceil 2; ramp(i) = i / 2, so
  // pair 0 keeps its frequency, pair 1 is half interpolated, pairs 2 and 3
  // are divided by the factor 4. Attention factor 0.1 ln 4 + 1.
  const RopeScaling s{.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64};
  const RopeTable t = MakeRopeTable(kTheta, kDim, s);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(t.inv_freq[1], 0.1f * (0.5f / 4 + 0.5f));  // 0.0625
  EXPECT_FLOAT_EQ(t.inv_freq[2], 0.0025f);
  EXPECT_FLOAT_EQ(t.inv_freq[3], 0.00025f);
  EXPECT_NEAR(t.attention_factor, 1.1386294, 1e-6);

  // Without truncation the ramp runs from 0 (clamped) to 1.008:
  // pair 1 is (1 - 0) / 1.008 = 0.992 interpolated.
  RopeScaling exact = s;
  exact.truncate = false;
  const RopeTable u = MakeRopeTable(kTheta, kDim, exact);
  const double ramp1 = 1.0 / 1.0080001056;
  EXPECT_NEAR(u.inv_freq[1], 0.1 * (ramp1 / 4 + (1 - ramp1)), 1e-8);
  EXPECT_FLOAT_EQ(u.inv_freq[2], 0.0025f);

  // A configured attention factor wins over the default.
  RopeScaling af = s;
  af.attention_factor = 0.75f;
  EXPECT_EQ(MakeRopeTable(kTheta, kDim, af).attention_factor, 0.75f);
  EXPECT_EQ(YarnDefaultAttentionFactor(1.0f), 1.0f);
  EXPECT_NEAR(YarnDefaultAttentionFactor(8.0f), 1.2079442, 1e-6);
}

TEST(RopeScaling, FrequencyFactorsDivideTheBase) {
  // llama.cpp's rope_freqs.weight: base[i] / factors[i], before any scaling.
  const float factors[] = {1.0f, 2.0f, 4.0f, 8.0f};
  const RopeTable t = MakeRopeTable(kTheta, kDim, {}, factors);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(t.inv_freq[1], 0.05f);
  EXPECT_FLOAT_EQ(t.inv_freq[2], 0.0025f);
  EXPECT_FLOAT_EQ(t.inv_freq[3], 0.000125f);
  const RopeTable lin = MakeRopeTable(kTheta, kDim, {.type = RopeScalingType::kLinear, .factor = 2.0f}, factors);
  EXPECT_FLOAT_EQ(lin.inv_freq[3], 0.0000625f);
}

TEST(RopeScaling, RopeScalesCosAndSinByTheAttentionFactor) {
  const RopeTable t =
      MakeRopeTable(kTheta, kDim, {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64});
  const std::vector<float> x0 = {1, 2, 3, 4, 5, 6, 7, 8};
  for (bool interleaved : {true, false}) {
    std::vector<float> x = x0;
    Rope(x.data(), kDim, 100, t.inv_freq.data(), interleaved, t.attention_factor);
    for (int i = 0; i < kDim / 2; ++i) {
      const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + kDim / 2;
      const double ang = 100.0 * t.inv_freq[i], m = t.attention_factor;
      EXPECT_NEAR(x[a], m * (x0[a] * std::cos(ang) - x0[b] * std::sin(ang)), 2e-5) << i;
      EXPECT_NEAR(x[b], m * (x0[a] * std::sin(ang) + x0[b] * std::cos(ang)), 2e-5) << i;
    }
    // At position 0 the rotation is the identity, the magnitude still scaled.
    std::vector<float> y = x0;
    Rope(y.data(), kDim, 0, t.inv_freq.data(), interleaved, t.attention_factor);
    for (int c = 0; c < kDim; ++c) EXPECT_FLOAT_EQ(y[c], x0[c] * t.attention_factor);
  }
}

TEST(RopeScaling, TypeNames) {
  EXPECT_EQ(RopeScalingTypeName(RopeScalingType::kNone), "none");
  EXPECT_EQ(RopeScalingTypeName(RopeScalingType::kLinear), "linear");
  EXPECT_EQ(RopeScalingTypeName(RopeScalingType::kLlama3), "llama3");
  EXPECT_EQ(RopeScalingTypeName(RopeScalingType::kYarn), "yarn");
}

}  // namespace
}  // namespace beacon
