// A Config checked against the server's ModelInfo (configs made by the real
// command-line parser, cli/loadtest/flags.h), and a run's load validated.
#include "loadtest/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/loadtest/flags.h"
#include "loadtest/runner.h"
#include "tests/cli/loadtest/parse_args.h"

namespace beacon::loadtest {
namespace {

using testing::Parse;

TEST(LoadtestConfigTest, ValidateLoad) {
  LoadOptions o;
  EXPECT_NE(ValidateLoad(o).message().find("--rate"), absl::string_view::npos);
  o.concurrency = 2;
  EXPECT_NE(ValidateLoad(o).message().find("--requests"), absl::string_view::npos);
  o.requests = 3;
  EXPECT_TRUE(ValidateLoad(o).ok());
  o.rate = 1;
  EXPECT_FALSE(ValidateLoad(o).ok());
}

v1::ModelInfo Info() {
  v1::ModelInfo info;
  info.set_context_length(2048);
  info.set_vocab_size(49152);
  info.set_kv_budget_min(32);
  info.set_kv_budget_max(4096);
  for (const char* p : {"full", "beacon", "streaming"}) {
    v1::KvPolicyInfo* k = info.add_kv_policies();
    k->set_name(p);
    k->set_allowed(std::string(p) != "streaming");
  }
  return info;
}

TEST(LoadtestConfigTest, ApplyModelInfoChecksAgainstTheServer) {
  Config c = *Parse({"--concurrency", "1", "--kv-mix", "full,beacon@64,default"});
  ASSERT_TRUE(ApplyModelInfo(Info(), &c).ok());
  EXPECT_EQ(c.workload.token_min, 1000);
  EXPECT_EQ(c.workload.token_max, 40000);

  c = *Parse({"--concurrency", "1", "--kv-policy", "streaming"});
  EXPECT_NE(ApplyModelInfo(Info(), &c).message().find("'streaming' is not allowed"), absl::string_view::npos);
  // The server's list is the registry: a name it does not list is unknown, and the error says what it serves.
  c = *Parse({"--concurrency", "1", "--kv-mix", "full,lru"});
  EXPECT_NE(
      ApplyModelInfo(Info(), &c).message().find("unknown KV policy 'lru' (the server serves: default, full, beacon)"),
      absl::string_view::npos)
      << ApplyModelInfo(Info(), &c);
  c = *Parse({"--concurrency", "1", "--kv-policy", "beacon", "--kv-budget", "16"});
  EXPECT_NE(ApplyModelInfo(Info(), &c).message().find("outside the server's range [32, 4096]"),
            absl::string_view::npos);
  c = *Parse({"--concurrency", "1", "--prompt-len", "fixed:4096"});
  EXPECT_NE(ApplyModelInfo(Info(), &c).message().find("context (2048"), absl::string_view::npos);

  // A small vocabulary narrows the synthetic id range.
  v1::ModelInfo small = Info();
  small.set_vocab_size(512);
  c = *Parse({"--concurrency", "1"});
  ASSERT_TRUE(ApplyModelInfo(small, &c).ok());
  EXPECT_EQ(c.workload.token_max, 512);
  EXPECT_EQ(c.workload.token_min, 256);
}

}  // namespace
}  // namespace beacon::loadtest
