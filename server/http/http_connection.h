// Internal to the HTTP server (http_server.h): what the server shares with its
// connections (including the connection accounting behind the limits) and the
// entry points of the per-connection state machine in http_connection.cc. The
// pool that runs handlers is in http_worker_pool.h. Not for other modules.
#ifndef BEACON_SERVER_HTTP_HTTP_CONNECTION_H_
#define BEACON_SERVER_HTTP_HTTP_CONNECTION_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "server/http/http_admission.h"
#include "server/http/http_server.h"
#include "server/http/http_worker_pool.h"
#include "util/mutex.h"

namespace beacon::http_internal {

// One request's disconnect: set by the connection's strand (EOF, reset,
// timeout, Stop), read and subscribed to by the handler through its
// HttpResponder. Thread-safe.
class DisconnectSignal {
 public:
  bool disconnected() const { return disconnected_.load(std::memory_order_acquire); }

  // Runs the callbacks once, outside the lock, unless Finish() came first.
  void Disconnect() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::function<void()>> callbacks;
    {
      MutexLock lock(&mu_);
      if (finished_ || disconnected_.exchange(true)) return;
      callbacks.swap(callbacks_);
      firing_ = true;
    }
    for (auto& cb : callbacks) {
      try {
        cb();
      } catch (...) {  // would otherwise end an IO thread, and the server with it
      }
    }
    MutexLock lock(&mu_);
    firing_ = false;
    cv_.SignalAll();
  }
  // Runs `cb` at once (on this thread, without the lock) when already
  // disconnected; drops it once Finish() has run.
  void OnDisconnect(std::function<void()> cb) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      if (!disconnected_) {
        callbacks_.push_back(std::move(cb));
        return;
      }
    }
    cb();
  }
  // The handler has returned: waits for running callbacks; none runs after.
  void Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::function<void()>> dropped;  // destroyed after the lock is released
    MutexLock lock(&mu_);
    finished_ = true;
    dropped.swap(callbacks_);
    while (firing_) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;  // signalled when firing_ goes back to false
  // Set under mu_ by Disconnect(); read without it by disconnected().
  std::atomic<bool> disconnected_{false};
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool firing_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

class Connection;

// Owned by the server; outlives every Connection (the server destroys its
// io_context, and with it the last connections, before this).
struct ServerShared {
  ServerShared(const HttpServerOptions& o, Router r)
      : options(o),
        router(std::move(r)),
        limits(o.max_connections, o.max_connections_per_client, o.probe_connections) {}

  const HttpServerOptions options;
  const Router router;      // read-only: handler pointers into it stay valid
  WorkerPool pool;          // runs the handlers
  ConnectionLimits limits;  // each Connection holds its AdmissionTicket
  // Set under mu (so that no connection registers after StopConnections()'s
  // snapshot); read without it by connections deciding keep-alive.
  std::atomic<bool> stopping{false};
  Mutex mu;
  // Every live connection, rejected ones too, so that Stop() closes them all.
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections ABSL_GUARDED_BY(mu);
};

// Serves HTTP on an accepted `socket` until the peer leaves, a timeout or
// StopConnections(), admitted by shared->limits (503 when refused; probe
// routes only in the probe reserve). The socket's executor must be a strand
// of the server's io_context.
void ServeConnection(ServerShared* shared, boost::asio::ip::tcp::socket socket) ABSL_LOCKS_EXCLUDED(shared->mu);

// Marks the server stopping (no connection is served after this; responses
// stop offering keep-alive) and closes every connection, returning once each
// close has taken effect: running handlers then see Disconnected(). Handlers
// may still be running; join shared->pool next. REQUIRES: IO threads running.
void StopConnections(ServerShared* shared) ABSL_LOCKS_EXCLUDED(shared->mu);

}  // namespace beacon::http_internal

#endif  // BEACON_SERVER_HTTP_HTTP_CONNECTION_H_
