#include "server/ops/process_guards.h"

#include <google/protobuf/stubs/logging.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace beacon {
namespace {

LogRateLimiter* g_limiter = nullptr;  // set once by LimitProtobufLogging; never destroyed

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Handler(google::protobuf::LogLevel level, const char* /*file*/, int /*line*/, const std::string& message) {
  const char* name = "LOG";
  logging::Level as = logging::Level::kError;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      name = "INFO";
      as = logging::Level::kInfo;
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      name = "WARNING";
      as = logging::Level::kWarn;
      break;
    case google::protobuf::LOGLEVEL_ERROR: name = "ERROR"; break;
    case google::protobuf::LOGLEVEL_FATAL: name = "FATAL"; break;
  }
  const std::string out = g_limiter->Line(absl::StrCat("libprotobuf ", name), message,
                                          level == google::protobuf::LOGLEVEL_FATAL, NowSeconds());
  if (!out.empty()) logging::Write(as, {}, out);
}

}  // namespace

absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  OpenFileLimit out{r.rlim_cur, r.rlim_cur, r.rlim_max};
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) {
      return absl::InternalError(absl::StrCat("setrlimit(RLIMIT_NOFILE, ", r.rlim_max, "): ", std::strerror(errno)));
    }
    out.soft = r.rlim_max;
  }
  return out;
}

std::string LogRateLimiter::Line(const std::string& level, const std::string& message, bool fatal, double now_s) {
  MutexLock lock(&mu_);
  if (now_s - window_start_ >= window_s_) {
    window_start_ = now_s;
    printed_ = 0;
  }
  if (!fatal && printed_ >= burst_) {
    ++suppressed_;
    return "";
  }
  ++printed_;
  std::string line = absl::StrCat("[", level, "] ", message);
  if (suppressed_ > 0) {
    absl::StrAppend(&line, " (", suppressed_, " similar lines suppressed)");
    suppressed_ = 0;
  }
  return line;
}

void LimitProtobufLogging(int burst, int window_s) {
  if (g_limiter == nullptr) g_limiter = new LogRateLimiter(burst, window_s);
  google::protobuf::SetLogHandler(&Handler);
}

}  // namespace beacon
