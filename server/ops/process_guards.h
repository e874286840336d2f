// Process-wide settings beacon-serve makes at start-up so that a hostile
// client cannot exhaust what the whole process shares: file descriptors and
// the log.
//
// Thread ownership: call from main() before any server thread starts.
#ifndef BEACON_SERVER_OPS_PROCESS_GUARDS_H_
#define BEACON_SERVER_OPS_PROCESS_GUARDS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "util/mutex.h"

namespace beacon {

struct OpenFileLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t soft = 0;    // the soft limit now
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (systemd and many shells
// start services at a soft 1,024 while the hard limit is far higher): every
// connection of both listeners holds a descriptor, and running out of them
// is what stops gRPC 1.51 from accepting (see grpc_front_end.h). INTERNAL
// naming the call when the limit cannot be read or set.
absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit();

// Routes protobuf's log (e.g. the "String field ... contains invalid UTF-8"
// ERROR logged for every such gRPC request) through a rate limiter: at most
// `burst` lines per `window_s` seconds reach stderr, and the next line that
// does says how many were suppressed. A client can otherwise flood the log
// with one bad request after another. FATAL lines always pass.
void LimitProtobufLogging(int burst = 5, int window_s = 10);

// The limiter behind LimitProtobufLogging: a fixed window of `burst` lines
// per `window_s` seconds; the rest are counted and reported by the next line
// that passes. Thread-safe.
class LogRateLimiter {
 public:
  LogRateLimiter(int burst, double window_s) : burst_(burst), window_s_(window_s) {}
  // The line to print for `message` at time `now_s` (seconds, any epoch), or
  // "" to drop it. `fatal` lines always pass.
  std::string Line(const std::string& level, const std::string& message, bool fatal, double now_s)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  const int burst_;
  const double window_s_;
  double window_start_ ABSL_GUARDED_BY(mu_) = -1e18;
  int printed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_PROCESS_GUARDS_H_
