// Percentiles, summaries and goodput against hand-computed values (SLO
// parsing: tests/workload/slo_test.cc).
#include "loadtest/stats.h"

#include <gtest/gtest.h>

namespace beacon::loadtest {
namespace {

TEST(PercentileTest, LinearInterpolationBetweenClosestRanks) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // rank = p/100 * (n-1): p50 -> 4.5 -> 5.5; p90 -> 8.1 -> 9.1; p99 -> 8.91 -> 9.91.
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 5.5);
  EXPECT_NEAR(Percentile(v, 90), 9.1, 1e-12);
  EXPECT_NEAR(Percentile(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 10);
  // Unsorted input; rank 0.4 * 4 = 1.6 -> 20 + 0.6 * (35 - 20) = 29.
  EXPECT_DOUBLE_EQ(Percentile({50, 15, 40, 35, 20}, 40), 29);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(PercentileTest, SummaryOf) {
  const Summary s = Summary::Of({4, 1, 3, 2});
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_NEAR(s.p90, 3.7, 1e-12);   // rank 2.7
  EXPECT_NEAR(s.p99, 3.97, 1e-12);  // rank 2.97
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_EQ(Summary::Of({}).count, 0);
}

RequestResult Req(double start, double ttft, double e2e, int tokens, int code = 0, const char* finish = "length") {
  RequestResult r;
  r.start_s = start;
  r.ttft_s = ttft;
  r.e2e_s = e2e;
  r.output_tokens = tokens;
  r.prompt_tokens = 10;
  for (int i = 1; i < tokens; ++i) r.itl_s.push_back((e2e - ttft) / (tokens - 1));
  r.grpc_code = code;
  r.finish_reason = finish;
  return r;
}

TEST(StatsTest, TpotAndSloChecks) {
  const RequestResult r = Req(0, 0.1, 1.1, 11);  // TPOT (1.1 - 0.1) / 10 = 100 ms
  EXPECT_NEAR(r.TpotS(), 0.1, 1e-12);
  EXPECT_TRUE(MeetsSlo(r, *ParseSlo("ttft_ms=100,tpot_ms=100,e2e_ms=1100")));
  EXPECT_FALSE(MeetsSlo(r, *ParseSlo("ttft_ms=99")));
  EXPECT_FALSE(MeetsSlo(r, *ParseSlo("tpot_ms=99")));
  EXPECT_FALSE(MeetsSlo(r, *ParseSlo("e2e_ms=1099")));
  // TPOT is not defined for a single token: not checked.
  EXPECT_TRUE(MeetsSlo(Req(0, 0.05, 0.06, 1), *ParseSlo("tpot_ms=1")));
  EXPECT_EQ(Req(0, 0.05, 0.06, 1).TpotS(), 0);
  // Failed requests never meet an SLO, even an empty one.
  EXPECT_FALSE(MeetsSlo(Req(0, -1, 0.01, 0, 8, ""), Slo{}));
  EXPECT_FALSE(MeetsSlo(Req(0, 0.1, 2, 5, 0, "time_limit"), Slo{}));
  EXPECT_TRUE(MeetsSlo(Req(0, 0.1, 2, 5, 0, "eos"), Slo{}));
}

TEST(StatsTest, SummarizeGoodputThroughputAndErrors) {
  std::vector<RequestResult> rs;
  RequestResult warm = Req(0, 5, 9, 3);  // slow warm-up: excluded from every figure
  warm.warmup = true;
  rs.push_back(warm);
  rs.push_back(Req(1.0, 0.2, 1.2, 11));                  // TPOT 100 ms, ends at 2.2
  rs.push_back(Req(1.5, 0.4, 2.4, 21));                  // TPOT 100 ms, ends at 3.9
  rs.push_back(Req(2.0, 0.1, 0.5, 5));                   // TPOT 100 ms, ends at 2.5
  rs.push_back(Req(2.5, 1.0, 3.0, 11));                  // TTFT 1000 ms: misses ttft_ms=500, ends at 5.5
  rs.push_back(Req(3.0, -1, 0.001, 0, 8, ""));           // RESOURCE_EXHAUSTED
  rs.push_back(Req(3.0, 0.3, 1.0, 4, 0, "time_limit"));  // cut short
  const RunSummary s = Summarize(rs, *ParseSlo("ttft_ms=500,tpot_ms=150"));
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.succeeded, 4);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.errors, (std::map<std::string, int64_t>{{"RESOURCE_EXHAUSTED", 1}, {"finish:time_limit", 1}}));
  EXPECT_EQ(s.finish_reasons, (std::map<std::string, int64_t>{{"length", 4}, {"time_limit", 1}}));
  // Window: first measured start 1.0 to last measured end 5.5.
  EXPECT_NEAR(s.duration_s, 4.5, 1e-12);
  EXPECT_EQ(s.good, 3);
  EXPECT_NEAR(s.goodput, 3 / 4.5, 1e-12);
  EXPECT_NEAR(s.attainment, 0.5, 1e-12);
  EXPECT_NEAR(s.request_throughput, 4 / 4.5, 1e-12);
  EXPECT_EQ(s.output_tokens, 11 + 21 + 5 + 11 + 0 + 4);
  EXPECT_NEAR(s.output_throughput, 52 / 4.5, 1e-9);
  EXPECT_EQ(s.prompt_tokens, 60);
  // Latencies over the 4 successful requests, in ms.
  EXPECT_EQ(s.ttft_ms.count, 4);
  EXPECT_NEAR(s.ttft_ms.mean, (200 + 400 + 100 + 1000) / 4.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms.median, 300, 1e-9);
  EXPECT_NEAR(s.tpot_ms.median, 100, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p99, Percentile({100, 100, 100, 200}, 99), 1e-9);  // (3.0-1.0)/10 = 200 ms
  EXPECT_EQ(s.itl_ms.count, 10 + 20 + 4 + 10);
  EXPECT_NEAR(s.e2e_ms.max, 3000, 1e-9);
  // All requests, warm-up included.
  EXPECT_EQ(s.all_requests, 7);
  EXPECT_EQ(s.all_output_tokens, 52 + 3);
  EXPECT_EQ(s.all_prompt_tokens, 70);
}

TEST(StatsTest, WithoutAnSloEverySuccessIsGood) {
  const RunSummary s = Summarize({Req(0, 0.1, 1, 3), Req(0, 0.1, 1, 3, 14, "")}, Slo{});
  EXPECT_EQ(s.good, 1);
  EXPECT_NEAR(s.attainment, 0.5, 1e-12);
  EXPECT_EQ(Summarize({}, Slo{}).duration_s, 0);
}

TEST(StatsTest, GrpcCodeNames) {
  EXPECT_EQ(GrpcCodeName(0), "OK");
  EXPECT_EQ(GrpcCodeName(3), "INVALID_ARGUMENT");
  EXPECT_EQ(GrpcCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(GrpcCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(99), "CODE_99");
}

}  // namespace
}  // namespace beacon::loadtest
