// The log front (util/log.h) and beacon-serve's spdlog backend
// (server/ops/log_backend.h): levels filter, the request id reaches its field,
// JSON lines parse and escape, text stays one line per record.
#include "server/ops/log_backend.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "util/log.h"

namespace beacon {
namespace {

std::vector<std::string> Lines(const std::ostringstream& out) {
  return absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
}

class LogBackendTest : public ::testing::Test {
 protected:
  void Install(logging::Level level, LogFormat format) {
    InstallLogBackend(LogConfig{level, format, "beacon-test"}, std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
  }
  // Later tests (and the rest of the binary) log to stderr again.
  void TearDown() override {
    logging::SetBackend(nullptr);
    logging::SetMinLevel(logging::Level::kInfo);
  }
  std::ostringstream out_;
};

TEST(LogLevel, ParsesEveryNameAndRefusesOthersByName) {
  for (logging::Level l : {logging::Level::kTrace, logging::Level::kDebug, logging::Level::kInfo, logging::Level::kWarn,
                           logging::Level::kError, logging::Level::kOff}) {
    EXPECT_EQ(*logging::ParseLevel(logging::LevelName(l)), l);
  }
  EXPECT_EQ(*logging::ParseLevel("warn"), logging::Level::kWarn);
  absl::StatusOr<logging::Level> bad = logging::ParseLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'verbose'"), std::string::npos);
  EXPECT_FALSE(ParseLogFormat("yaml").ok());
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
}

TEST_F(LogBackendTest, JsonLinesCarryTheRequestIdAndEscape) {
  Install(logging::Level::kInfo, LogFormat::kJson);
  logging::Request(logging::Level::kInfo, "req-7", "finished: reason=%s text=\"%s\"", "length", "a\nb\x01");
  logging::Info("ready grpc=%s:%d", "127.0.0.1", 50051);
  logging::Write(logging::Level::kError, "req-8", "bad utf-8 \xff here");
  const std::vector<std::string> lines = Lines(out_);
  ASSERT_EQ(lines.size(), 3u) << out_.str();
  nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["request_id"], "req-7");
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["logger"], "beacon-test");
  EXPECT_EQ(first["message"], "finished: reason=length text=\"a\nb\x01\"");
  EXPECT_EQ(first["time"].get<std::string>().size(), std::string("2026-12-01T04:05:06.789Z").size());
  nlohmann::json second = nlohmann::json::parse(lines[1]);
  EXPECT_FALSE(second.contains("request_id"));
  EXPECT_EQ(second["message"], "ready grpc=127.0.0.1:50051");
  nlohmann::json third = nlohmann::json::parse(lines[2]);  // invalid UTF-8 replaced, still JSON
  EXPECT_EQ(third["level"], "error");
  EXPECT_EQ(third["request_id"], "req-8");
}

TEST_F(LogBackendTest, TheLevelFilters) {
  Install(logging::Level::kWarn, LogFormat::kText);
  logging::Info("info %d", 1);
  logging::Debug("debug");
  logging::Request(logging::Level::kInfo, "req-1", "not written");
  logging::Warn("warned %d", 1);
  logging::Error("failed");
  const std::vector<std::string> lines = Lines(out_);
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_NE(lines[0].find(" warning warned 1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" error failed"), std::string::npos) << lines[1];
  EXPECT_FALSE(logging::Enabled(logging::Level::kInfo));
  EXPECT_TRUE(logging::Enabled(logging::Level::kError));
}

TEST_F(LogBackendTest, TextIsOneLinePerRecordWithTheIdInBrackets) {
  Install(logging::Level::kDebug, LogFormat::kText);
  logging::Request(logging::Level::kDebug, "beacon-00ab", "received: two\nlines");
  const std::vector<std::string> lines = Lines(out_);
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  EXPECT_NE(lines[0].find(" debug [beacon-00ab] received: two\\nlines"), std::string::npos) << lines[0];
}

TEST_F(LogBackendTest, OffWritesNothing) {
  Install(logging::Level::kOff, LogFormat::kText);
  logging::Error("nothing");
  logging::Write(logging::Level::kOff, {}, "nothing either");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(LogBackendTest, ThreadsKeepTheirOwnRequestIds) {
  Install(logging::Level::kInfo, LogFormat::kJson);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      const std::string id = "req-" + std::to_string(t);
      for (int i = 0; i < 200; ++i) logging::Request(logging::Level::kInfo, id, "n=%d of %s", i, id);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<std::string> lines = Lines(out_);
  ASSERT_EQ(lines.size(), 800u);
  for (const std::string& line : lines) {
    nlohmann::json j = nlohmann::json::parse(line);
    const std::string msg = j["message"];
    EXPECT_EQ(msg.substr(msg.rfind(' ') + 1), j["request_id"]) << line;  // the id of the thread that wrote it
  }
}

TEST(FormatLogLine, FixedTimeInUtcWithMilliseconds) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796097906789));  // 2026-12-01
  EXPECT_EQ(FormatLogLine(LogFormat::kText, "p", t, logging::Level::kInfo, "", "hi"),
            "2026-12-01T04:05:06.789Z info hi");
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, "p", t, logging::Level::kWarn, "r", "hi"),
            R"({"time":"2026-12-01T04:05:06.789Z","level":"warning","logger":"p","request_id":"r","message":"hi"})");
}

}  // namespace
}  // namespace beacon
