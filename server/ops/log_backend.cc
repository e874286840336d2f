#include "server/ops/log_backend.h"

#include <spdlog/formatter.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon {
namespace {

// The record being written on this thread: spdlog's log_msg has no field for
// a request id, and the logger is synchronous, so the formatter (which runs
// inside logger->log on the same thread) reads it from here.
thread_local std::string_view current_request_id;

struct Installed {
  LogConfig config;
  std::shared_ptr<spdlog::logger> logger;
  const Installed* previous;  // replaced ones stay alive and reachable
};
// Set at start-up (InstallLogBackend). A replacement keeps the old one alive,
// chained from the new one (a thread may still be writing through it), so
// nothing is freed or leaked.
std::atomic<Installed*> installed{nullptr};

spdlog::level::level_enum ToSpdlog(logging::Level level) {
  switch (level) {
    case logging::Level::kTrace: return spdlog::level::trace;
    case logging::Level::kDebug: return spdlog::level::debug;
    case logging::Level::kInfo: return spdlog::level::info;
    case logging::Level::kWarn: return spdlog::level::warn;
    case logging::Level::kError: return spdlog::level::err;
    case logging::Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

logging::Level FromSpdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return logging::Level::kTrace;
    case spdlog::level::debug: return logging::Level::kDebug;
    case spdlog::level::info: return logging::Level::kInfo;
    case spdlog::level::warn: return logging::Level::kWarn;
    case spdlog::level::err:
    case spdlog::level::critical: return logging::Level::kError;
    default: return logging::Level::kOff;
  }
}

// UTC, milliseconds: 2026-12-01T04:05:06.789Z.
std::string Timestamp(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                         tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

class LineFormatter : public spdlog::formatter {
 public:
  LineFormatter(LogFormat format, std::string program) : format_(format), program_(std::move(program)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = FormatLogLine(format_, program_, msg.time, FromSpdlog(msg.level), current_request_id,
                                           std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_, program_);
  }

 private:
  LogFormat format_;
  std::string program_;
};

void SpdlogBackend(const logging::Record& r) {
  Installed* in = installed.load();
  if (in == nullptr) return;
  current_request_id = r.request_id;
  in->logger->log(ToSpdlog(r.level), spdlog::string_view_t(r.message.data(), r.message.size()));
  current_request_id = {};
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("log format '", std::string(name), "' is not one of: text, json"));
}

std::string FormatLogLine(LogFormat format, std::string_view program, std::chrono::system_clock::time_point time,
                          logging::Level level, std::string_view request_id, std::string_view message) {
  const std::string when = Timestamp(time);
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["time"] = when;
    j["level"] = std::string(logging::LevelName(level));
    j["logger"] = std::string(program);
    if (!request_id.empty()) j["request_id"] = std::string(request_id);
    j["message"] = std::string(message);
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(when, " ", std::string(logging::LevelName(level)), " ");
  if (!request_id.empty()) absl::StrAppend(&line, "[", std::string(request_id), "] ");
  for (char c : message) {
    if (c == '\n') {
      line += "\\n";
    } else if (c != '\r') {
      line += c;
    }
  }
  return line;
}

void InstallLogBackend(const LogConfig& config, spdlog::sink_ptr sink) {
  if (sink == nullptr) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(config.program, std::move(sink));
  logger->set_formatter(std::make_unique<LineFormatter>(config.format, config.program));
  logger->set_level(ToSpdlog(config.level));
  logger->flush_on(spdlog::level::trace);  // every record reaches the collector at once
  // Replaced, not freed: a thread may still be inside the old backend.
  installed.store(new Installed{config, std::move(logger), installed.load()});
  logging::SetMinLevel(config.level);
  logging::SetBackend(&SpdlogBackend);
}

}  // namespace beacon
