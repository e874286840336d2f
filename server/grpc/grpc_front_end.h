// The gRPC listener of beacon-serve, kept alive against connection floods.
//
// Why this exists: gRPC C++ 1.51 (Debian 12) stops accepting for good after
// one accept4() failure such as EMFILE: a burst of idle connections that
// exhausts the process's file descriptors leaves the port open (the kernel
// still completes handshakes into the backlog) while no connection is ever
// served again, and nothing in gRPC reports it. The front end therefore:
//   * bounds what a connection may hold: a handshake deadline, an idle limit
//     (connections without calls are sent GOAWAY and closed), an optional age
//     limit, keepalive enforcement (clients may not ping more often than
//     every 10 s without calls);
//   * checks itself through the real listener: every `check_interval` a new
//     connection (its own subchannel, never a pooled one) makes a
//     grpc.health.v1 Check call to the bound port. Any answer from the server,
//     NOT_SERVING during a drain included, proves the listener accepts; a
//     transport failure or a deadline does not. serving() is the verdict and
//     feeds /ready, so a replica whose gRPC side is dead leaves the pool;
//   * judges a failed check by when it ended (JudgeSelfCheck): one that came
//     back well past its own deadline means the process itself did not get
//     the CPU (a loaded or throttled host, a low-priority replica); it says
//     nothing about the listener and counts neither way. Found in issue 32's
//     accuracy runs: a beacon-serve at nice 19 beside builds failed three
//     checks, rebuilt a healthy listener, and 600 s later (retire_grace) the
//     retired server cancelled 16 long reasoning streams;
//   * recovers: after `failures_to_restart` failed checks in a row it builds
//     a replacement server on the same port (SO_REUSEPORT) and retires the old
//     one. The old server's listener closes at once; streams it is running
//     finish (up to `retire_grace`) on their existing connections. While file
//     descriptors are still exhausted the rebuild fails and is retried on the
//     next check, so the port serves again within a check interval or two of
//     the flood ending.
//
// Thread ownership: Start/Shutdown on the main thread; the watchdog thread
// owns restarts; serving()/SetServingStatus()/port() from any thread.
#ifndef BEACON_SERVER_GRPC_GRPC_FRONT_END_H_
#define BEACON_SERVER_GRPC_GRPC_FRONT_END_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "util/mutex.h"

namespace beacon {

// What one self-check says about the listener. A listener that accepts
// connections but never serves them (the EMFILE case above) leaves them
// unread in the kernel's backlog: the check fails at its deadline, on time,
// and so does a probe of the port (accept_probe.h). A listener that the
// probe finds answering while the check went unanswered is alive and behind:
// gRPC 1.51 works off one connection's flood of streams (100,000 opened and
// reset at once: HTTP/2 rapid reset) on one of its executor threads, and
// closures of other connections that hash to that thread wait behind it for
// seconds, while new connections are still accepted and sent SETTINGS
// within a millisecond (tests/server/test_grpc_rapid_reset.py). A rebuild
// cannot help that (the attacker reconnects) and it cancels every call the
// old server runs, so a busy check counts neither way. A starved process
// fails a check late, because the check's own deadline could not fire on
// time either.
enum class SelfCheckVerdict {
  kServing,       // the server answered
  kBusy,          // no answer in time, but the listener accepts and answers a probe: not counted
  kFailed,        // no answer, the probe unanswered, and the check ended in time: counts towards a restart
  kInconclusive,  // no answer, but the check ended more than `timeout` past its deadline
};
SelfCheckVerdict JudgeSelfCheck(bool answered, bool accepts, std::chrono::steady_clock::duration elapsed,
                                std::chrono::milliseconds timeout);

struct GrpcFrontEndOptions {
  std::string host = "0.0.0.0";
  int port = 50051;  // 0: an ephemeral port (kept across restarts)
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  bool tls = false;                          // the self-check dials TLS (without verifying the certificate)
  bool reflection = true;                    // grpc.reflection.v1alpha (the API schema only)
  std::vector<std::string> health_services;  // named in grpc.health.v1 besides ""

  // Connection limits (gRPC channel arguments). 0 disables the idle and age
  // limits.
  std::chrono::milliseconds handshake_timeout{10'000};     // accept -> HTTP/2 settings
  std::chrono::milliseconds max_connection_idle{120'000};  // no call in flight for this long: closed
  std::chrono::milliseconds max_connection_age{0};         // then GOAWAY, and closed after the grace
  std::chrono::milliseconds max_connection_age_grace{0};   // 0 with an age limit: unlimited grace
  int max_receive_message_bytes = 4 << 20;                 // gRPC's default, stated
  // What one client may hold (issue 46; gRPC's own defaults are unlimited):
  // streams open at once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_
  // STREAMS: a client queues the rest itself), the largest reply, and the
  // memory gRPC may take for its buffers across all connections (a
  // ResourceQuota: past it gRPC stops reading from sockets rather than
  // growing).
  int max_concurrent_streams = 128;
  int max_send_message_bytes = 16 << 20;
  int64_t memory_quota_bytes = int64_t{1} << 30;

  // Self-check and recovery.
  std::chrono::milliseconds check_interval{1'000};
  std::chrono::milliseconds check_timeout{2'000};
  int failures_to_restart = 3;             // consecutive failed checks (one slow check under load is not death)
  std::chrono::seconds retire_grace{600};  // how long a retired server's streams may run on
};

class GrpcFrontEnd {
 public:
  // Makes a fresh set of services for each server built (a gRPC service is
  // registered with one server only). Called on the calling thread of Start()
  // and on the watchdog thread.
  using ServiceFactory = std::function<std::vector<std::unique_ptr<grpc::Service>>()>;

  // Binds host:port, serves, passes one self-check (retried for up to 5 s)
  // and starts the watchdog. INVALID_ARGUMENT for a bad option (the field
  // named); UNAVAILABLE when the port cannot be bound or never answers.
  static absl::StatusOr<std::unique_ptr<GrpcFrontEnd>> Start(GrpcFrontEndOptions options, ServiceFactory services);

  GrpcFrontEnd(const GrpcFrontEnd&) = delete;
  GrpcFrontEnd& operator=(const GrpcFrontEnd&) = delete;
  ~GrpcFrontEnd();  // Shutdown(now)

  int port() const { return port_; }
  // The verdict of the latest self-check: the listener accepts and answers.
  bool serving() const { return serving_.load(std::memory_order_acquire); }
  // Restarts done so far (for logs and tests).
  int restarts() const { return restarts_.load(); }
  // Failed checks not counted because they ended late (JudgeSelfCheck).
  int inconclusive_checks() const { return inconclusive_.load(); }
  // Checks not answered in time on a connection the listener accepted.
  int busy_checks() const { return busy_.load(); }
  // Self-checks judged so far (every verdict): lets a test wait for the
  // watchdog to have looked, instead of sleeping and hoping it did.
  int checks() const { return checks_.load(); }

  // The grpc.health.v1 status of "" and of each service name given to it:
  // false while draining. Applies to servers built later too.
  void SetServingStatus(bool serving) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the watchdog, then shuts the current and the retired servers down:
  // new calls are refused at once, calls in flight may run until `deadline`.
  // Idempotent.
  void Shutdown(std::chrono::system_clock::time_point deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Instance {
    std::vector<std::unique_ptr<grpc::Service>> services;  // outlive the server
    std::unique_ptr<grpc::Server> server;
    ~Instance();
  };

  GrpcFrontEnd(GrpcFrontEndOptions options, ServiceFactory services);
  // A server on `port` (0: ephemeral, then *bound is the port), or nullptr.
  std::unique_ptr<Instance> Build(int port, int* bound, std::string* error) ABSL_LOCKS_EXCLUDED(mu_);
  // One health call through the listener; blocks up to check_timeout, so
  // never under mu_ (SetServingStatus would wait for it).
  bool CheckOnce() ABSL_LOCKS_EXCLUDED(mu_);
  void Watch() ABSL_LOCKS_EXCLUDED(mu_);    // the watchdog thread
  void Restart() ABSL_LOCKS_EXCLUDED(mu_);  // watchdog thread

  const GrpcFrontEndOptions options_;
  const ServiceFactory make_services_;
  int port_ = 0;
  std::atomic<bool> serving_{false};
  std::atomic<int> restarts_{0};
  std::atomic<int> inconclusive_{0};
  std::atomic<int> busy_{0};
  std::atomic<int> checks_{0};

  Mutex mu_;
  CondVar wake_;  // signalled when stopping_ is set
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool health_serving_ ABSL_GUARDED_BY(mu_) = true;
  std::unique_ptr<Instance> current_ ABSL_GUARDED_BY(mu_) ABSL_PT_GUARDED_BY(mu_);
  std::vector<std::thread> retiring_ ABSL_GUARDED_BY(mu_);  // each shuts one old server down
  std::thread watchdog_;
  std::once_flag shutdown_once_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_GRPC_GRPC_FRONT_END_H_
