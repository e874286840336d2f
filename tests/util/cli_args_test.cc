// util/cli_args.h: the list readers name the option and the bad value.
#include "util/cli_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace beacon {
namespace {

cli::Args Parsed(std::vector<std::string> argv) {
  argv.insert(argv.begin(), "prog");
  std::vector<char*> ptrs;
  for (std::string& s : argv) ptrs.push_back(s.data());
  cli::Args a;
  a.Declare("batches", false, "1,4", "sizes");
  a.Declare("ids", false, "", "token ids");
  EXPECT_TRUE(a.Parse(static_cast<int>(ptrs.size()), ptrs.data()).ok());
  return a;
}

TEST(CliArgsTest, PositiveIntListTakesSizesAndNamesWhatIsWrong) {
  EXPECT_EQ(*Parsed({}).PositiveIntList("batches"), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(*Parsed({"--batches", "16,,64"}).PositiveIntList("batches"), (std::vector<int32_t>{16, 64}));
  for (const char* bad : {"0", "3,-1", "x", "2.5"}) {
    absl::StatusOr<std::vector<int32_t>> v = Parsed({"--batches", bad}).PositiveIntList("batches");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("--batches"), std::string::npos) << v.status();
    EXPECT_NE(v.status().message().find("not a positive integer"), std::string::npos) << v.status();
  }
  EXPECT_EQ(Parsed({"--batches", ","}).PositiveIntList("batches").status().message(), "--batches: empty");
  // IntList takes any integer (token ids) and may be empty.
  EXPECT_EQ(*Parsed({"--ids", "-1,0,7"}).IntList("ids"), (std::vector<int32_t>{-1, 0, 7}));
  EXPECT_TRUE(Parsed({}).IntList("ids")->empty());
}

}  // namespace
}  // namespace beacon
