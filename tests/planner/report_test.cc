// The report's JSON shape, table and plot files.
#include "planner/report.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "planner/plots.h"
#include "tests/planner/planner_test_util.h"

namespace beacon::planner {
namespace {

PlanReport SmallReport() {
  PlanReport r;
  r.model = test::ToyModel();
  r.gpu = test::ToyGpu();
  r.pool.blocks = 500;
  r.pool.block_size = 16;
  r.pool.bytes_per_block = 16 * r.model.kv_bytes_per_token();
  r.pool.bytes = 500 * r.pool.bytes_per_block;
  r.workload.concurrency = 8;
  r.workload.num_requests = 40;
  r.workload.prompt = *LengthDist::Parse("fixed:32", "p");
  r.workload.output = *LengthDist::Parse("fixed:200", "o");
  r.sched.max_running = 8;
  r.slo = *ParseSlo("ttft_ms=10", 0.9);
  r.target_rate = 100;
  for (int b : {0, 32, 64}) {
    ConfigResult c;
    c.kv = KvPolicyOptions::DefaultsFor(b == 0 ? KvPolicyKind::kFull : KvPolicyKind::kBeacon);
    if (b > 0) c.kv.budget = b;
    c.label = b == 0 ? "full" : absl::StrCat("beacon b=", b);
    RunInputs in{r.model, r.gpu, r.pool, r.sched, c.kv, r.workload};
    c.run = *RunPlan(in);
    c.has_capacity = true;
    c.capacity.saturation_rate = 50;
    c.capacity.max_rate = 20 + b;
    c.replicas = ReplicasFor(r.target_rate, c.capacity.max_rate);
    r.configs.push_back(c);
  }
  for (int k = 1; k <= 4; ++k) r.rate_grid.push_back(25.0 * k);
  return r;
}

TEST(Report, JsonShape) {
  const nlohmann::json j = ToJson(SmallReport());
  for (const char* key : {"tool", "model", "gpu", "pool", "scheduler", "workload", "slo", "configurations"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_EQ(j["configurations"].size(), 3u);
  const nlohmann::json& c = j["configurations"][1];
  for (const char* key : {"policy", "budget", "footprint_slots", "admitted_by_footprint", "admitted_concurrency",
                          "peak_kv_bytes", "peak_total_bytes", "output_tokens_per_s", "ttft_s", "tpot_s", "capacity"}) {
    EXPECT_TRUE(c.contains(key)) << key;
  }
  EXPECT_EQ(c["policy"], "beacon");
  EXPECT_EQ(c["budget"], 32);
  EXPECT_TRUE(j["configurations"][0]["budget"].is_null());
  EXPECT_EQ(c["capacity"]["replicas"], 2);  // ceil(100 / 52)
  EXPECT_EQ(c["capacity"]["replicas_vs_rate"].size(), 4u);
  for (const char* p : {"p50", "p90", "p99", "mean", "max"}) EXPECT_TRUE(c["ttft_s"].contains(p)) << p;
  EXPECT_TRUE(j["gpu"]["measured"].empty());
}

TEST(Report, TableNamesEveryConfigurationAndTheModelledStatus) {
  const std::string t = FormatTable(SmallReport());
  EXPECT_NE(t.find("no measured constants"), std::string::npos) << t;
  EXPECT_NE(t.find("full"), std::string::npos);
  EXPECT_NE(t.find("beacon        64"), std::string::npos) << t;
  EXPECT_NE(t.find("replicas@100"), std::string::npos) << t;
}

TEST(Report, PlotFiles) {
  const std::string dir = ::testing::TempDir() + "/planner_report_test";
  std::filesystem::remove_all(dir);
  std::vector<std::string> written;
  ASSERT_TRUE(WritePlotFiles(SmallReport(), dir, &written).ok());
  std::ifstream csv(dir + "/budget_sweep.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("policy,budget,", 0), 0u);
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 3);
  EXPECT_TRUE(std::filesystem::exists(dir + "/replicas_vs_rate.csv"));
  for (const char* png : {"/budget_sweep.png", "/replicas_vs_rate.png"}) {
    std::ifstream f(dir + png, std::ios::binary);
    char sig[8] = {};
    f.read(sig, 8);
    EXPECT_EQ(std::string(sig + 1, 3), "PNG") << png;
  }
  EXPECT_EQ(written.size(), 4u);
}

}  // namespace
}  // namespace beacon::planner
