// beacon-loadtest's command line into a Config: good configurations parse;
// bad arguments are INVALID_ARGUMENT naming the option.
#include "cli/loadtest/flags.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "loadtest/runner.h"
#include "tests/cli/loadtest/parse_args.h"

namespace beacon::loadtest {
namespace {

using testing::Parse;

TEST(LoadtestFlagsTest, RunDefaultsAndAClosedLoop) {
  absl::StatusOr<Config> c = Parse({"--concurrency", "4", "--requests", "12", "--prompt-len", "fixed:32",
                                    "--output-len", "uniform:8:24", "--ignore-eos", "--kv-mix", "full,beacon@64",
                                    "--slo", "tpot_ms=50", "--json", "out.json", "--warmup", "2", "--seed", "9"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->sweep);
  EXPECT_EQ(c->load.concurrency, 4);
  EXPECT_EQ(c->load.rate, 0);
  EXPECT_EQ(c->load.requests, 12);
  EXPECT_EQ(c->load.warmup, 2);
  EXPECT_EQ(c->load.seed, 9u);
  EXPECT_EQ(c->workload.seed, 9u);
  EXPECT_EQ(c->workload.prompt_len.ToString(), "fixed:32");
  EXPECT_EQ(c->workload.output_len.ToString(), "uniform:8:24");
  EXPECT_TRUE(c->workload.ignore_eos);
  ASSERT_EQ(c->workload.kv_mix.size(), 2u);
  EXPECT_EQ(*c->slo.tpot_ms, 50);
  EXPECT_EQ(c->json_path, "out.json");
  EXPECT_EQ(c->client.server, "127.0.0.1:50051");
  EXPECT_TRUE(ValidateLoad(c->load).ok());

  c = Parse({"run", "--rate", "2.5", "--burstiness", "0.5", "--duration-s", "30"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->load.rate, 2.5);
  EXPECT_EQ(c->load.burstiness, 0.5);
  EXPECT_EQ(c->load.duration_s, 30);
  EXPECT_EQ(c->load.requests, 0);
  EXPECT_TRUE(ValidateLoad(c->load).ok());

  c = Parse({"--rate", "inf"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(std::isinf(c->load.rate));
  EXPECT_EQ(c->load.requests, 100);  // the default count

  c = Parse({"--concurrency", "1", "--kv-policy", "beacon", "--kv-budget", "128"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->workload.kv_mix.size(), 1u);
  EXPECT_EQ(c->workload.kv_mix[0].Label(), "beacon@128");
  EXPECT_TRUE(Parse({"--help"})->help);
  c = Parse({"plot", "--from", "a.json,b.json", "--plot", "cmp.png", "--names", "full,beacon"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->plot_only);
  EXPECT_EQ(c->plot_from, (std::vector<std::string>{"a.json", "b.json"}));
  EXPECT_EQ(c->plot_names, (std::vector<std::string>{"full", "beacon"}));
}

TEST(LoadtestFlagsTest, SweepLevels) {
  absl::StatusOr<Config> c = Parse({"sweep", "--concurrency", "1,2,4,8", "--slo", "ttft_ms=900"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->sweep);
  EXPECT_TRUE(c->by_concurrency);
  EXPECT_EQ(c->levels, (std::vector<double>{1, 2, 4, 8}));
  c = Parse({"sweep", "--rate", "0.5:2:+0.5", "--slo", "e2e_ms=9000", "--slo-attainment", "0.95", "--plot", "s.png",
             "--stop-after-fails", "2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->by_concurrency);
  EXPECT_EQ(c->levels, (std::vector<double>{0.5, 1, 1.5, 2}));
  EXPECT_EQ(c->slo_attainment, 0.95);
  EXPECT_EQ(c->stop_after_fails, 2);
  c = Parse({"sweep", "--concurrency", "2,4", "--waves", "3", "--slo", "ttft_ms=900"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->waves, 3);
  EXPECT_EQ(*ParseLevels("1:64:x2", true, "--concurrency"), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(*ParseLevels("3", true, "--concurrency"), (std::vector<double>{3}));
}

TEST(LoadtestFlagsTest, BadLevels) {
  for (const char* spec :
       {"4,2", "1,1", "0,1", "1.5,2", "a", "1:8", "1:8:2", "8:1:x2", "1:8:x1", "1:8:+0", "1:2:3:4"}) {
    absl::StatusOr<std::vector<double>> l = ParseLevels(spec, true, "--concurrency");
    ASSERT_FALSE(l.ok()) << spec;
    EXPECT_NE(l.status().message().find("--concurrency"), absl::string_view::npos) << l.status();
  }
  EXPECT_TRUE(ParseLevels("0.5,1.5", false, "--rate").ok());
}

TEST(LoadtestFlagsTest, BadArgumentsNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {{"--concurrency", "2", "--bogus"}, "unknown option --bogus"},
      {{"--concurrency"}, "--concurrency needs a value"},
      {{"--rate", "2", "--concurrency", "2"}, "not both"},
      {{"--requests", "5"}, "--rate R (open loop"},
      {{"--concurrency", "0"}, "--concurrency must be in [1"},
      {{"--concurrency", "two"}, "--concurrency expects an integer"},
      {{"--rate", "-1"}, "--rate must be a positive"},
      {{"--rate", "0"}, "--rate must be a positive"},
      {{"--rate", "1", "--burstiness", "0"}, "--burstiness must be a number > 0"},
      {{"--concurrency", "1", "--burstiness", "2"}, "use it with --rate"},
      {{"--concurrency", "1", "--requests", "5", "--duration-s", "3"}, "--requests or --duration-s, not both"},
      {{"--concurrency", "1", "--duration-s", "-3"}, "--duration-s must be a number > 0"},
      {{"--concurrency", "1", "--requests", "0"}, "--requests must be in [1"},
      {{"--concurrency", "1", "--prompt-len", "zipf:3"}, "--prompt-len: unknown distribution 'zipf'"},
      {{"--concurrency", "1", "--output-len", "uniform:9:2"}, "--output-len: uniform needs A <= B"},
      {{"--concurrency", "1", "--slo", "ttft=3"}, "--slo: unknown key 'ttft'"},
      {{"--concurrency", "1", "--kv-mix", "LRU!"}, "'LRU!' is not a KV policy name"},
      {{"--concurrency", "1", "--kv-mix", "full", "--kv-policy", "beacon"}, "--kv-mix or --kv-policy"},
      {{"--concurrency", "1", "--kv-policy", "no pe"}, "'no pe' is not a KV policy name"},
      {{"--concurrency", "1", "--kv-budget", "0"}, "--kv-budget must be in [1"},
      {{"--concurrency", "1", "--temperature", "-1"}, "--temperature must be a number >= 0"},
      {{"--concurrency", "1", "--connections", "0"}, "--connections must be in [1"},
      {{"--concurrency", "1", "--timeout-s", "0"}, "--timeout-s must be a number > 0"},
      {{"--concurrency", "1", "--prompts", "/nonexistent/x.jsonl"}, "cannot read /nonexistent/x.jsonl"},
      {{"--concurrency", "1", "--plot", "x.png"}, "--plot belongs to `beacon-loadtest sweep`"},
      {{"--concurrency", "1", "extra"}, "unexpected argument 'extra'"},
      {{"sweep", "--concurrency", "1,2"}, "sweep needs --slo"},
      {{"sweep", "--concurrency", "2,1", "--slo", "ttft_ms=5"}, "ascending"},
      {{"sweep", "--concurrency", "1,2", "--slo", "ttft_ms=5", "--slo-attainment", "1.5"}, "(0, 1]"},
      {{"--concurrency", "1", "--server", ""}, "--server is empty"},
      {{"plot", "--plot", "x.png"}, "plot needs --from"},
      {{"plot", "--from", "a.json"}, "plot needs --plot"},
      {{"plot", "--from", "a.json,b.json", "--plot", "x.png", "--names", "a"}, "one name per --from file"},
      {{"--concurrency", "1", "--from", "a.json"}, "--from belongs to `beacon-loadtest plot`"},
      {{"--concurrency", "1", "--waves", "2"}, "--waves sizes each level of a closed-loop sweep"},
      {{"sweep", "--rate", "1,2", "--waves", "2", "--slo", "ttft_ms=5"}, "closed-loop sweep"},
      {{"sweep", "--concurrency", "1,2", "--waves", "2", "--requests", "4", "--slo", "ttft_ms=5"},
       "--waves or --requests"},
      {{"sweep", "--concurrency", "1,2", "--waves", "0", "--slo", "ttft_ms=5"}, "--waves must be in [1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Config> r = Parse(c.args);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    ASSERT_FALSE(r.ok()) << joined;
    EXPECT_TRUE(r.status().code() == absl::StatusCode::kInvalidArgument ||
                r.status().code() == absl::StatusCode::kNotFound)
        << r.status();
    EXPECT_NE(r.status().message().find(c.needle), absl::string_view::npos) << joined << "-> " << r.status();
  }
}

TEST(LoadtestFlagsTest, EnvironmentFillsUnsetOptionsAndTheCommandLineWins) {
  setenv("BEACON_LOADTEST_SERVER", "10.0.0.1:1234", 1);
  setenv("BEACON_LOADTEST_REQUESTS", "7", 1);
  absl::StatusOr<Config> c = Parse({"--concurrency", "1", "--requests", "3"});
  unsetenv("BEACON_LOADTEST_SERVER");
  unsetenv("BEACON_LOADTEST_REQUESTS");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->client.server, "10.0.0.1:1234");
  EXPECT_EQ(c->load.requests, 3);
}

}  // namespace
}  // namespace beacon::loadtest
