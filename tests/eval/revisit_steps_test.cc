// beacon-eval revisit-steps: the reference's attention mass on a range of
// positions (the revisit-step test) on hand-made records, and bad
// checkpoint directories failing with the problem named before any replay.
#include "eval/revisit_steps.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace beacon::eval {
namespace {

TEST(ReferenceMassTest, AveragesOverLayersAndQueryHeads) {
  PolicyModelInfo m;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.head_dim = 8;
  RecordingPolicy ref(m);
  // Every (layer, KV head): query head 0 puts 0.5 on slot 1, query head 1
  // puts 1.0 on slot 3; 4 slots.
  const std::vector<float> probs = {0.25f, 0.5f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f};
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) ref.ObserveAttention(l, h, probs.data(), 2, 4);
  }
  EXPECT_DOUBLE_EQ(ReferenceMass(ref, m, 0, 4), 1.0);
  EXPECT_DOUBLE_EQ(ReferenceMass(ref, m, 1, 2), 0.25);  // (0.5 + 0) / 2
  EXPECT_DOUBLE_EQ(ReferenceMass(ref, m, 3, 10), 0.5);  // past the slots: nothing more
  EXPECT_DOUBLE_EQ(ReferenceMass(ref, m, 2, 2), 0.0);
  EXPECT_DOUBLE_EQ(ReferenceMass(ref, m, 3, 1), 0.0);
}

TEST(RevisitStepsTest, BadInputIsNamedBeforeAnyReplay) {
  RevisitStepsOptions o;
  o.policies = {"beacon"};
  o.budgets = {128};
  o.out_dir = ::testing::TempDir() + "/revisit_steps_out";
  o.from = ::testing::TempDir() + "/no_such_run";
  // No runtime is needed: every check below comes before the model is used.
  absl::Status s = RunRevisitSteps(nullptr, o, stderr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no_such_run"), std::string::npos) << s;

  const std::string dir = ::testing::TempDir() + "/revisit_steps_bad";
  std::filesystem::create_directories(dir + "/prompts");
  std::ofstream(dir + "/prompts/x.json") << "{\"not\": \"a checkpoint\"}";
  o.from = dir;
  s = RunRevisitSteps(nullptr, o, stderr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("x.json"), std::string::npos) << s;

  o.thresholds = {0.1, 0.0};
  s = RunRevisitSteps(nullptr, o, stderr);
  EXPECT_NE(s.message().find("threshold"), std::string::npos) << s;
}

}  // namespace
}  // namespace beacon::eval
