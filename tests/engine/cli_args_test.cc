// util/cli_args.h: the command-line conventions of docs/development.md
// (values, switches and their --no- form, --help/-h, refused old spellings,
// the environment). Here because device_flags_test.cc, its first user's
// test, is; the parser is header-only.
#include "util/cli_args.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace beacon::cli {
namespace {

absl::Status Parse(Args* args, std::vector<std::string> argv) {
  argv.insert(argv.begin(), "prog");
  std::vector<char*> ptrs;
  for (std::string& a : argv) ptrs.push_back(a.data());
  return args->Parse(static_cast<int>(ptrs.size()), ptrs.data());
}

Args Declared() {
  Args a;
  a.Declare("kv-budget", false, "512", "KV budget");
  a.Declare("ignore-eos", true, "false", "keep going past EOS");
  a.Declare("prefix-cache", true, "true", "reuse prompt prefixes");
  a.Declare("keep-prompt", true, "", "unset: the policy's default");
  a.Declare("stop", false, "", "stop string (repeatable)");
  a.Refuse("budgets", "--budgets was renamed --kv-budget");
  return a;
}

TEST(CliArgs, ValuesInBothSpellingsAndRepeated) {
  Args a = Declared();
  ASSERT_TRUE(Parse(&a, {"--kv-budget", "64", "--stop=a", "--stop", "b", "pos"}).ok());
  EXPECT_EQ(*a.Int("kv-budget"), 64);
  EXPECT_EQ(a.All("stop"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.positional(), std::vector<std::string>{"pos"});
  Args d = Declared();
  ASSERT_TRUE(Parse(&d, {}).ok());
  EXPECT_EQ(*d.Int("kv-budget"), 512);
  EXPECT_FALSE(d.Has("kv-budget"));
}

TEST(CliArgs, SwitchesBareNegatedAndWithAValue) {
  Args a = Declared();
  ASSERT_TRUE(Parse(&a, {"--ignore-eos", "--no-prefix-cache"}).ok());
  EXPECT_TRUE(a.Flag("ignore-eos"));
  EXPECT_FALSE(a.Flag("prefix-cache"));
  for (auto [arg, want] : std::vector<std::pair<std::string, bool>>{{"--prefix-cache=true", true},
                                                                    {"--prefix-cache=false", false},
                                                                    {"--prefix-cache=on", true},
                                                                    {"--prefix-cache=off", false},
                                                                    {"--prefix-cache=1", true},
                                                                    {"--prefix-cache=0", false}}) {
    Args b = Declared();
    ASSERT_TRUE(Parse(&b, {arg}).ok()) << arg;
    EXPECT_EQ(b.Flag("prefix-cache"), want) << arg;
    EXPECT_EQ(b.Str("prefix-cache"), want ? "true" : "false") << "stored canonically: " << arg;
  }
  Args d = Declared();
  ASSERT_TRUE(Parse(&d, {}).ok());
  EXPECT_TRUE(d.Flag("prefix-cache"));
  EXPECT_FALSE(d.Flag("ignore-eos"));
  EXPECT_FALSE(d.Has("keep-prompt")) << "a switch with no default stays unset";
  Args k = Declared();
  ASSERT_TRUE(Parse(&k, {"--no-keep-prompt"}).ok());
  EXPECT_TRUE(k.Has("keep-prompt"));
  EXPECT_FALSE(k.Flag("keep-prompt"));
}

TEST(CliArgs, MalformedSwitchesNameTheFlagAndTheFix) {
  Args a = Declared();
  absl::Status s = Parse(&a, {"--prefix-cache=maybe"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--prefix-cache"), std::string::npos) << s;
  // The old `--name off` spelling would silently become a positional argument.
  Args b = Declared();
  s = Parse(&b, {"--prefix-cache", "off"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--prefix-cache=off"), std::string::npos) << s;
  // --no- only negates switches.
  Args c = Declared();
  s = Parse(&c, {"--no-kv-budget"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown option --no-kv-budget"), std::string::npos) << s;
}

TEST(CliArgs, UnknownAndRefusedOptions) {
  Args a = Declared();
  absl::Status s = Parse(&a, {"--bogus"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "unknown option --bogus");
  Args b = Declared();
  s = Parse(&b, {"--budgets=64"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--budgets was renamed --kv-budget");
  Args c = Declared();
  s = Parse(&c, {"--kv-budget"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs a value"), std::string::npos) << s;
}

TEST(CliArgs, HelpLongShortAndUsageListsEveryOption) {
  for (const char* h : {"--help", "-h"}) {
    Args a = Declared();
    ASSERT_TRUE(Parse(&a, {"--kv-budget", "8", h}).ok()) << h;
    EXPECT_TRUE(a.help()) << h;
  }
  Args a = Declared();
  ASSERT_TRUE(Parse(&a, {}).ok());
  EXPECT_FALSE(a.help());
  const std::string help = a.Help("usage: prog [options]");
  EXPECT_EQ(help.rfind("usage: prog [options]\n", 0), 0u) << help;
  for (const char* want : {"--kv-budget VALUE", "(default: 512)", "--ignore-eos, --no-ignore-eos", "(default: false)",
                           "--prefix-cache, --no-prefix-cache", "(default: true)", "--help, -h", "--stop VALUE"}) {
    EXPECT_NE(help.find(want), std::string::npos) << want << " in\n" << help;
  }
  EXPECT_EQ(help.find("budgets"), std::string::npos) << "refused spellings are not options";
}

TEST(CliArgs, DoubleDashEndsTheOptions) {
  Args a = Declared();
  ASSERT_TRUE(Parse(&a, {"--ignore-eos", "--", "--not-an-option", "-h"}).ok());
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"--not-an-option", "-h"}));
  EXPECT_FALSE(a.help());
}

TEST(CliArgs, EnvironmentFillsWhatTheCommandLineLeaves) {
  setenv("CLITEST_KV_BUDGET", "128", 1);
  setenv("CLITEST_PREFIX_CACHE", "off", 1);
  setenv("CLITEST_IGNORE_EOS", "true", 1);
  Args a = Declared();
  ASSERT_TRUE(Parse(&a, {"--ignore-eos=false"}).ok());
  ASSERT_TRUE(a.LoadEnvironment("CLITEST_").ok());
  EXPECT_EQ(*a.Int("kv-budget"), 128);
  EXPECT_FALSE(a.Flag("prefix-cache"));
  EXPECT_FALSE(a.Flag("ignore-eos")) << "the command line wins";

  setenv("CLITEST_PREFIX_CACHE", "maybe", 1);
  Args b = Declared();
  ASSERT_TRUE(Parse(&b, {}).ok());
  absl::Status s = b.LoadEnvironment("CLITEST_");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CLITEST_PREFIX_CACHE"), std::string::npos) << s;
  unsetenv("CLITEST_PREFIX_CACHE");

  setenv("CLITEST_BUDGETS", "64", 1);
  Args c = Declared();
  ASSERT_TRUE(Parse(&c, {}).ok());
  s = c.LoadEnvironment("CLITEST_");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CLITEST_BUDGETS: --budgets was renamed --kv-budget"), std::string::npos) << s;
  for (const char* v : {"CLITEST_BUDGETS", "CLITEST_KV_BUDGET", "CLITEST_IGNORE_EOS"}) unsetenv(v);
}

TEST(CliArgs, CommandsHelpListsEveryCommand) {
  const std::string h = CommandsHelp("beacon-x", {{"model", "on a model"}, {"synthetic", "no model"}});
  EXPECT_EQ(h.rfind("usage: beacon-x COMMAND [options]\n", 0), 0u) << h;
  EXPECT_NE(h.find("  model"), std::string::npos) << h;
  EXPECT_NE(h.find("synthetic"), std::string::npos) << h;
  EXPECT_NE(h.find("beacon-x COMMAND --help"), std::string::npos) << h;
  EXPECT_TRUE(IsHelpArg("--help"));
  EXPECT_TRUE(IsHelpArg("-h"));
  EXPECT_FALSE(IsHelpArg("help"));
}

}  // namespace
}  // namespace beacon::cli
