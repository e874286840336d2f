// SLO bounds: the syntax shared by beacon-loadtest and beacon-plan.
#include "workload/slo.h"

#include <gtest/gtest.h>

namespace beacon::workload {
namespace {

TEST(SloTest, ParsesAnySubset) {
  absl::StatusOr<Slo> s = ParseSlo("ttft_ms=500,tpot_ms=50.5,e2e_ms=20000");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s->ttft_ms, 500);
  EXPECT_EQ(*s->tpot_ms, 50.5);
  EXPECT_EQ(*s->e2e_ms, 20000);
  EXPECT_EQ(s->ToString(), "ttft_ms=500,tpot_ms=50.5,e2e_ms=20000");
  s = ParseSlo(" tpot_ms = 40 ");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s->tpot_ms, 40);
  EXPECT_FALSE(s->ttft_ms.has_value());
  EXPECT_FALSE(s->empty());
  EXPECT_TRUE(Slo{}.empty());
}

TEST(SloTest, ErrorsNameTheFlagAndTheProblem) {
  struct Case {
    const char* spec;
    const char* needle;
  };
  for (const Case& c :
       {Case{"ttft=5", "unknown key 'ttft'"}, Case{"latency_ms=5", "unknown key"}, Case{"ttft_ms", "not KEY=VALUE"},
        Case{"ttft_ms=0", "positive"}, Case{"tpot_ms=-3", "positive"}, Case{"e2e_ms=fast", "positive number"},
        Case{"ttft_ms=1,ttft_ms=2", "given twice"}, Case{"", "empty"}, Case{"ttft_ms=1,", "not KEY=VALUE"}}) {
    absl::StatusOr<Slo> s = ParseSlo(c.spec);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message().rfind("--slo", 0), 0u) << s.status();
    EXPECT_NE(s.status().message().find(c.needle), absl::string_view::npos) << c.spec << ": " << s.status();
  }
}

TEST(SloTest, ToStringParsesBack) {
  const Slo s = *ParseSlo("e2e_ms=600000, ttft_ms=2000");
  EXPECT_EQ(s.ToString(), "ttft_ms=2000,e2e_ms=600000");
  absl::StatusOr<Slo> back = ParseSlo(s.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ttft_ms, s.ttft_ms);
  EXPECT_EQ(back->tpot_ms, s.tpot_ms);
  EXPECT_EQ(back->e2e_ms, s.e2e_ms);
  EXPECT_EQ(Slo{}.ToString(), "");
}

}  // namespace
}  // namespace beacon::workload
