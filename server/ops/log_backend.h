// beacon-serve's log backend: spdlog behind util/log.h, one line per record on
// stderr, as text for people or JSON for log collectors (Loki, Fluent Bit,
// Cloud Logging), with the request id as its own field on every record about
// a request. --log-level and --log-format choose (docs/observability.md).
#ifndef BEACON_SERVER_OPS_LOG_BACKEND_H_
#define BEACON_SERVER_OPS_LOG_BACKEND_H_

#include <spdlog/common.h>

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "util/log.h"

namespace beacon {

enum class LogFormat { kText, kJson };

// "text" or "json"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name);

struct LogConfig {
  logging::Level level = logging::Level::kInfo;
  LogFormat format = LogFormat::kText;
  std::string program = "beacon-serve";  // the JSON "logger" field
};

// Installs spdlog as the process's log backend (logging::SetBackend) with
// `config`, writing to stderr, or to `sink` when given (tests). Call once at
// start-up, before other threads log; a later call replaces the first.
void InstallLogBackend(const LogConfig& config, spdlog::sink_ptr sink = nullptr);

// The line (without its newline) that one record becomes:
//   text: 2026-12-01T04:05:06.789Z info [beacon-00ab] finished: reason=length ...
//   json: {"time":"2026-12-01T04:05:06.789Z","level":"info","logger":"beacon-serve",
//          "request_id":"beacon-00ab","message":"finished: reason=length ..."}
// Text turns line breaks in the message into "\n" so a record stays one line;
// JSON escapes as JSON does and replaces invalid UTF-8. No request_id field
// (or bracket) when the record is about no request.
std::string FormatLogLine(LogFormat format, std::string_view program, std::chrono::system_clock::time_point time,
                          logging::Level level, std::string_view request_id, std::string_view message);

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_LOG_BACKEND_H_
