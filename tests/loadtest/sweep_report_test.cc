// Sweep judgement and the report formats (table, JSON, CSV, plot).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "loadtest/report.h"
#include "loadtest/sweep.h"

namespace beacon::loadtest {
namespace {

SweepLevel Level(double level, bool pass, double tpot_ms) {
  SweepLevel l;
  l.level = level;
  l.pass = pass;
  l.summary.requests = 10;
  l.summary.succeeded = 10;
  l.summary.good = pass ? 10 : 3;
  l.summary.attainment = l.summary.good / 10.0;
  l.summary.request_throughput = level * 0.9;
  l.summary.goodput = l.summary.request_throughput * l.summary.attainment;
  l.summary.ttft_ms = Summary::Of({50 * level, 60 * level});
  l.summary.tpot_ms = Summary::Of({tpot_ms, tpot_ms * 1.2});
  l.summary.e2e_ms = Summary::Of({1000 * level});
  l.summary.itl_ms = Summary::Of({tpot_ms});
  return l;
}

TEST(SweepTest, LevelPassesOnAttainment) {
  RunSummary s;
  EXPECT_FALSE(LevelPasses(s, 0.9));  // nothing measured
  s.requests = 10;
  s.attainment = 0.9;
  EXPECT_TRUE(LevelPasses(s, 0.9));
  s.attainment = 0.8;
  EXPECT_FALSE(LevelPasses(s, 0.9));
}

TEST(SweepTest, BestIsTheHighestPassBeforeTheFirstFailure) {
  SweepResult r;
  r.levels = {Level(1, true, 10), Level(2, true, 12), Level(4, false, 30), Level(8, true, 40)};
  JudgeSweep(&r);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(*r.best, 2);
  EXPECT_TRUE(r.bounded);
  r.levels = {Level(1, true, 10), Level(2, true, 12)};
  JudgeSweep(&r);
  EXPECT_EQ(*r.best, 2);
  EXPECT_FALSE(r.bounded);  // every level passed: no knee inside the range
  r.levels = {Level(1, false, 10)};
  JudgeSweep(&r);
  EXPECT_FALSE(r.best.has_value());
  EXPECT_TRUE(r.bounded);
}

TEST(ReportTest, SweepTableCsvJsonAndPlot) {
  SweepResult r;
  r.by_concurrency = true;
  r.slo = *ParseSlo("tpot_ms=20");
  r.levels = {Level(1, true, 10), Level(2, true, 15), Level(4, false, 30)};
  JudgeSweep(&r);
  const std::string table = SweepTable(r);
  EXPECT_NE(table.find("highest level meeting the SLO: concurrency 2"), std::string::npos) << table;
  EXPECT_NE(table.find("tpot_ms=20"), std::string::npos);
  const std::vector<std::string> rows = absl::StrSplit(SweepCsv(r), '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].substr(0, 11), "level,pass,");
  EXPECT_EQ(rows[3].substr(0, 4), "4,0,");
  Config c;
  c.sweep = true;
  c.by_concurrency = true;
  c.levels = {1, 2, 4};
  const nlohmann::json j = SweepJson(c, v1::ModelInfo(), r);
  EXPECT_EQ(j["best"], 2);
  EXPECT_EQ(j["bounded"], true);
  EXPECT_EQ(j["levels"].size(), 3u);
  EXPECT_EQ(j["slo"]["tpot_ms"], 20);
  EXPECT_EQ(j["config"]["loop"], "closed");
  const std::string path = ::testing::TempDir() + "/sweep.png";
  ASSERT_TRUE(WriteSweepPlot(r, path).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(bytes.str().substr(1, 3), "PNG");
}

TEST(ReportTest, SweepJsonRoundTripsAndComparisonPlots) {
  SweepResult r;
  r.by_concurrency = true;
  r.slo = *ParseSlo("ttft_ms=500,tpot_ms=20");
  r.levels = {Level(1, true, 10), Level(2, true, 15), Level(4, false, 30)};
  JudgeSweep(&r);
  Config c;
  c.sweep = true;
  c.by_concurrency = true;
  c.workload.kv_mix = {KvChoice{"beacon", 64, 1}};
  // Through text, as `beacon-loadtest plot --from` reads it.
  const nlohmann::json doc = nlohmann::json::parse(SweepJson(c, v1::ModelInfo(), r).dump());
  absl::StatusOr<SweepResult> back = SweepFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepName(doc), "beacon@64");
  EXPECT_TRUE(back->by_concurrency);
  EXPECT_EQ(*back->slo.ttft_ms, 500);
  EXPECT_EQ(*back->best, 2);
  ASSERT_EQ(back->levels.size(), 3u);
  EXPECT_EQ(back->levels[2].level, 4);
  EXPECT_FALSE(back->levels[2].pass);
  EXPECT_DOUBLE_EQ(back->levels[1].summary.tpot_ms.p90, r.levels[1].summary.tpot_ms.p90);
  EXPECT_DOUBLE_EQ(back->levels[1].summary.goodput, r.levels[1].summary.goodput);
  EXPECT_FALSE(SweepFromJson(nlohmann::json::parse(R"({"levels": 3})")).ok());

  SweepResult other = *back;
  other.levels.push_back(Level(8, false, 50));
  const std::string path = ::testing::TempDir() + "/compare.png";
  ASSERT_TRUE(WriteComparisonPlot({{"full", r}, {"beacon", other}}, path).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(bytes.str().substr(1, 3), "PNG");
  SweepResult by_rate = r;
  by_rate.by_concurrency = false;
  EXPECT_FALSE(WriteComparisonPlot({{"a", r}, {"b", by_rate}}, path).ok());
}

TEST(ReportTest, RunTableJsonAndCsv) {
  RequestResult a;
  a.index = 0;
  a.kv = "beacon@64";
  a.ttft_s = 0.1;
  a.e2e_s = 0.5;
  a.output_tokens = 5;
  a.prompt_tokens = 8;
  a.itl_s = {0.1, 0.1, 0.1, 0.1};
  a.finish_reason = "length";
  RequestResult b;
  b.index = 1;
  b.kv = "full";
  b.grpc_code = 8;
  b.error = "queue full, try later";
  const RunSummary s = Summarize({a, b}, *ParseSlo("ttft_ms=200"));
  const std::string table = RunTable(s, "test run");
  for (const char* needle : {"==== test run ====", "2 measured: 1 ok, 1 failed", "RESOURCE_EXHAUSTED 1", "TTFT", "TPOT",
                             "ITL", "E2E", "goodput", "1/2 requests (50.0%) meet ttft_ms=200"}) {
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  }
  Config c;
  c.load.concurrency = 2;
  c.load.requests = 2;
  const nlohmann::json j = RunJson(c, v1::ModelInfo(), s, {a, b});
  EXPECT_EQ(j["summary"]["all"]["output_tokens"], 5);
  EXPECT_EQ(j["summary"]["errors"]["RESOURCE_EXHAUSTED"], 1);
  EXPECT_EQ(j["requests"][0]["kv"], "beacon@64");
  EXPECT_EQ(j["requests"][0]["meets_slo"], true);
  EXPECT_EQ(j["requests"][1]["status"], "RESOURCE_EXHAUSTED");
  EXPECT_TRUE(j["requests"][1]["ttft_ms"].is_null());
  EXPECT_EQ(j["config"]["description"], DescribeRun(c));
  const std::vector<std::string> rows = absl::StrSplit(RequestsCsv({a, b}), '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NE(rows[1].find(",beacon@64,"), std::string::npos);
  EXPECT_NE(rows[2].find("\"queue full, try later\""), std::string::npos) << rows[2];  // quoted: has a comma
}

}  // namespace
}  // namespace beacon::loadtest
