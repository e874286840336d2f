// cli/plan/plan_flags.h: beacon-plan's command line into a PlanSetup. The
// program decides where shipped files are (--gpu-profile-dir first); options
// that cannot combine are refused naming them.
#include "cli/plan/plan_flags.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace beacon::planner {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<PlanSetup> Parse(std::vector<std::string> argv) {
  argv.insert(argv.begin(), "beacon-plan");
  std::vector<char*> ptrs;
  for (std::string& s : argv) ptrs.push_back(s.data());
  cli::Args a;
  DeclarePlanFlags(&a);
  if (absl::Status s = a.Parse(static_cast<int>(ptrs.size()), ptrs.data()); !s.ok()) return s;
  return ParsePlanSetup(a);
}

std::string Src(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }

TEST(PlanFlags, ModelGpuWorkloadAndConfigs) {
  absl::StatusOr<PlanSetup> s = Parse({"--model", Src("configs/qwen3-4b.json"), "--gpu", "h200", "--kv-policy",
                                       "full,beacon", "--kv-budget", "1024,2048", "--concurrency", "8"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->configs.size(), 3u);  // full, beacon at each budget
  EXPECT_EQ(s->report.workload.concurrency, 8);
  EXPECT_EQ(s->report.gpu.name, "NVIDIA H200 SXM");
}

TEST(PlanFlags, OptionsThatCannotCombineAreNamed) {
  const std::string model = Src("configs/qwen3-4b.json");
  absl::StatusOr<PlanSetup> s = Parse({"--model", model, "--rate", "1", "--concurrency", "4"});
  EXPECT_NE(s.status().message().find("--rate"), std::string::npos) << s.status();
  s = Parse({"--reproduce", "--model", model});
  EXPECT_NE(s.status().message().find("--reproduce fixes --model"), std::string::npos) << s.status();
  s = Parse({"--model", model, "--target-rate", "3"});
  EXPECT_NE(s.status().message().find("--target-rate needs --slo"), std::string::npos) << s.status();
}

// A profile directory of the program's own is tried before ./configs/gpus and
// the source tree; without it the name is not found, and the error lists
// where it looked.
TEST(PlanFlags, GpuProfileDirIsTriedFirst) {
  const fs::path dir = fs::temp_directory_path() / ("plan_flags_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(Src("configs/gpus/h200.json"), dir / "my-gpu.json", fs::copy_options::overwrite_existing);
  const std::string model = Src("configs/qwen3-4b.json");
  absl::StatusOr<PlanSetup> s = Parse({"--model", model, "--gpu", "my-gpu", "--gpu-profile-dir", dir.string()});
  EXPECT_TRUE(s.ok()) << s.status();
  s = Parse({"--model", model, "--gpu", "my-gpu"});
  EXPECT_TRUE(absl::IsNotFound(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("configs/gpus/my-gpu.json"), std::string::npos) << s.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace beacon::planner
