// XgrammarWarnings: what it keeps and for how long. That xgrammar's warnings
// reach it at all (the build's XGRAMMAR_LOG_CUSTOMIZE and the hooks) is shown
// by grammar_compiler_test.cc's refusals of looser compiles.
#include "engine/grammar/xgrammar_log.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

TEST(XgrammarWarnings, KeepsEachMessageOnceUpToTheBound) {
  XgrammarWarnings w;
  w.Add("a");
  w.Add("b");
  w.Add("a");
  EXPECT_EQ(w.messages(), (std::vector<std::string>{"a", "b"}));
  for (int i = 0; i < 40; ++i) w.Add("m" + std::to_string(i));
  EXPECT_EQ(w.messages().size(), XgrammarWarnings::kMax);
  EXPECT_EQ(w.messages().back(), "m13");
}

TEST(XgrammarWarnings, ScopesNestAndStayOnTheirThread) {
  XgrammarWarnings outer;
  {
    XgrammarWarnings inner;
    inner.Add("x");
    EXPECT_TRUE(outer.messages().empty());
  }
  // Another thread's scope is its own: nothing crosses.
  std::thread t([] {
    XgrammarWarnings other;
    other.Add("y");
    EXPECT_EQ(other.messages().size(), 1u);
  });
  t.join();
  EXPECT_TRUE(outer.messages().empty());
}

}  // namespace
}  // namespace beacon
