// Internal to the HTTP server (http_server.h): what the server shares with its
// connections (including the connection accounting behind the limits) and the
// entry points of the per-connection state machine in http_connection.cc. The
// pool that runs handlers is in http_worker_pool.h. Not for other modules.
#ifndef BEACON_SERVER_HTTP_CONNECTION_H_
#define BEACON_SERVER_HTTP_CONNECTION_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/http_admission.h"
#include "server/http_server.h"
#include "server/http_worker_pool.h"

namespace beacon::http_internal {

// One request's disconnect: set by the connection's strand (EOF, reset,
// timeout, Stop), read and subscribed to by the handler through its
// HttpResponder. Thread-safe.
class DisconnectSignal {
 public:
  bool disconnected() const { return disconnected_.load(std::memory_order_acquire); }

  // Runs the callbacks once, outside the lock, unless Finish() came first.
  void Disconnect() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    firing_ = false;
    cv_.notify_all();
  }
  void OnDisconnect(std::function<void()> cb) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;
      if (!disconnected_) {
        callbacks_.push_back(std::move(cb));
        return;
      }
    }
    cb();
  }
  // The handler has returned: waits for running callbacks; none runs after.
  void Finish() {
    std::vector<std::function<void()>> dropped;
    std::unique_lock<std::mutex> lock(mu_);
    finished_ = true;
    dropped.swap(callbacks_);
    cv_.wait(lock, [&] { return !firing_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> disconnected_{false};
  bool finished_ = false;                         // GUARDED_BY(mu_)
  bool firing_ = false;                           // GUARDED_BY(mu_)
  std::vector<std::function<void()>> callbacks_;  // GUARDED_BY(mu_)
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
  std::atomic<bool> stopping{false};
  std::mutex mu;
  // Every live connection, rejected ones too, so that Stop() closes them all.
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;  // GUARDED_BY(mu)
};

// Serves HTTP on an accepted `socket` until the peer leaves, a timeout or
// StopConnections(), admitted by shared->limits (503 when refused; probe
// routes only in the probe reserve). The socket's executor must be a strand
// of the server's io_context.
void ServeConnection(ServerShared* shared, boost::asio::ip::tcp::socket socket);

// Marks the server stopping (no connection is served after this; responses
// stop offering keep-alive) and closes every connection, returning once each
// close has taken effect: running handlers then see Disconnected(). Handlers
// may still be running; join shared->pool next. REQUIRES: IO threads running.
void StopConnections(ServerShared* shared);

}  // namespace beacon::http_internal

#endif  // BEACON_SERVER_HTTP_CONNECTION_H_
