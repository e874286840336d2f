// The process-wide log front every part of the tree writes through: a level,
// the request the record is about (empty when none) and one message.
//
// Libraries call logging::Info/Warn/Error/Debug or logging::Request; the
// process decides where records go by installing a backend with SetBackend:
// beacon-serve installs spdlog (server/ops/log_backend.h: text or JSON lines,
// --log-level, --log-format). Until one is installed, records at the minimum
// level or above go to stderr as "beacon: [request_id] message".
//
// Why a front and not spdlog called everywhere: kv/, engine/ and kernels/
// also build into binaries that carry no serving dependencies (the GPU check,
// the fuzzers, -DBEACON_WITH_SERVING=OFF); they log through this header,
// which needs nothing but Abseil.
//
// Thread-safe: the backend and the level are atomics; a backend must accept
// records from any thread. Formatting is skipped when the level is off.
#ifndef BEACON_UTIL_LOG_H_
#define BEACON_UTIL_LOG_H_

#include <atomic>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon::logging {

enum class Level : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

struct Record {
  Level level = Level::kInfo;
  std::string_view request_id;  // empty: not about one request
  std::string_view message;
};

// Receives every record at or above the minimum level.
using Backend = void (*)(const Record& record);

namespace internal {
inline std::atomic<Backend> backend{nullptr};
inline std::atomic<int> min_level{static_cast<int>(Level::kInfo)};

inline void WriteStderr(const Record& r) {
  std::string line = "beacon: ";
  if (!r.request_id.empty()) absl::StrAppend(&line, "[", std::string(r.request_id), "] ");
  absl::StrAppend(&line, std::string(r.message), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}
}  // namespace internal

// "trace", "debug", "info", "warning" (or "warn"), "error", "off".
inline std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kTrace: return "trace";
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warning";
    case Level::kError: return "error";
    case Level::kOff: return "off";
  }
  return "?";
}

// INVALID_ARGUMENT naming the value and the known names.
inline absl::StatusOr<Level> ParseLevel(std::string_view name) {
  for (Level l : {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError, Level::kOff}) {
    if (name == LevelName(l)) return l;
  }
  if (name == "warn") return Level::kWarn;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", std::string(name), "' is not one of: trace, debug, info, warning, error, off"));
}

// Null restores the stderr default.
inline void SetBackend(Backend backend) { internal::backend.store(backend); }
inline void SetMinLevel(Level level) { internal::min_level.store(static_cast<int>(level)); }
inline Level MinLevel() { return static_cast<Level>(internal::min_level.load(std::memory_order_relaxed)); }
inline bool Enabled(Level level) {
  return level != Level::kOff && static_cast<int>(level) >= internal::min_level.load(std::memory_order_relaxed);
}

// One record, already formatted.
inline void Write(Level level, std::string_view request_id, std::string_view message) {
  if (!Enabled(level)) return;
  const Record r{level, request_id, message};
  if (Backend b = internal::backend.load(); b != nullptr) {
    b(r);
  } else {
    internal::WriteStderr(r);
  }
}

// A record about one request (its id on the line, or in the JSON field).
template <typename... Args>
void Request(Level level, std::string_view request_id, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (Enabled(level)) Write(level, request_id, absl::StrFormat(format, args...));
}

template <typename... Args>
void Debug(const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, {}, absl::StrFormat(format, args...));
}
template <typename... Args>
void Info(const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, {}, absl::StrFormat(format, args...));
}
template <typename... Args>
void Warn(const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (Enabled(Level::kWarn)) Write(Level::kWarn, {}, absl::StrFormat(format, args...));
}
template <typename... Args>
void Error(const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (Enabled(Level::kError)) Write(Level::kError, {}, absl::StrFormat(format, args...));
}

}  // namespace beacon::logging

#endif  // BEACON_UTIL_LOG_H_
