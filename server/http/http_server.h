// The HTTP/1.1 front end (docs/design.md, "The parts"): exact-match routes,
// plain and streamed (chunked, for server-sent events) responses, keep-alive,
// limits and timeouts, on Boost.Beast. The gRPC server's main starts it beside gRPC with
// the routes of /health, /ready, /metrics and the OpenAI-compatible API.
//
// Threading model
//   * IO: `threads` IO threads run one asio io_context. A connection's socket
//     IO runs only on that connection's strand, never on a handler thread.
//   * Handlers: a request that matches a route runs its Handler on a handler
//     thread from a pool that grows to the number of handlers running at once
//     (at most one per connection, so at most max_connections +
//     probe_connections), shrinks back to a couple of threads once a burst
//     has been idle for 30 s (returning the freed memory to the OS), and is
//     joined by Stop(). Handlers may therefore block (wait on the scheduler's
//     per-request channel, sleep, compute) without stalling any socket, and run
//     concurrently with each other. 404/405/4xx framing errors are answered on
//     the IO strand without a handler.
//   * HttpResponder calls block the calling thread until the bytes are handed
//     to the kernel or the connection fails: the backpressure that keeps a slow
//     reader from buffering a whole generation in server memory. A responder
//     is used by one thread at a time (the handler thread, or a thread it hands
//     the responder to) and only until the handler returns, so a streaming
//     handler returns when its stream is done; Disconnected() and
//     OnDisconnect() may be called from any thread.
//   Blocking IO with a thread per connection would be simpler, but asio's
//   blocking reads can neither time out nor be interrupted, and a thread busy
//   in its handler could not notice its client leaving.
//   * Disconnects: while a handler runs, its connection keeps a read pending;
//     EOF, a reset, a write timeout or Stop() marks the exchange disconnected:
//     Disconnected() turns true, Write() returns false and OnDisconnect
//     callbacks run once. A client that half-closes its sending side after the
//     request counts as gone (as in Go's net/http). Bytes that arrive instead
//     (a pipelined request) are kept for the next read.
//
// Limits: bodies over max_body_bytes get 413, request headers over 16 KiB 431,
// unparsable requests 400; each closes the connection. Sockets use
// TCP_NODELAY so that a streamed token is not held back by Nagle's algorithm.
// Connections: at most max_connections are served at once, and at most
// max_connections_per_client from one peer address, so that one client (a
// slowloris attacker, a leaking connection pool) cannot take the whole port.
// A connection over either limit gets a 503 naming it and is closed; it counts
// against no one. Behind a reverse proxy all clients share the proxy's
// address: raise the per-client limit there, or set it to 0 (off).
// Probes: an orchestrator that cannot reach /health or /ready pulls the
// replica, so a full port must not starve them. Routes registered as
// RouteKind::kProbe are also served from a reserve of probe_connections
// connections beyond max_connections. A reserve connection must deliver its
// request within min(header_timeout, 2 s), gets one response without
// keep-alive and is closed; a request for any other route on it gets 503
// "too many connections". So nobody can sit in the reserve for long. Beyond
// the reserve, 503 too.
// Timeouts: a request line and headers must be complete within
// `header_timeout` of the request's first byte (for a new connection, of the
// accept, and then also within idle_timeout): a client trickling header bytes
// (slowloris) holds a connection for seconds, not minutes. Between keep-alive
// requests a connection may wait idle for `idle_timeout`. Reading a body, and
// a write the client does not drain, are each bounded by `idle_timeout`. On
// expiry the connection is closed without a response. A running handler is
// not timed: a queued generation may wait for as long as the scheduler keeps
// it.
#ifndef BEACON_SERVER_HTTP_HTTP_SERVER_H_
#define BEACON_SERVER_HTTP_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace beacon {
namespace http_internal {
class ServerState;
}  // namespace http_internal

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;          // as sent, e.g. "GET" (methods are case-sensitive)
  std::string target;          // the raw request target, e.g. "/v1/models?x=1"
  std::string path;            // target up to '?', not percent-decoded
  std::string query;           // after '?', without it, not decoded; may be empty
  HttpHeaders headers;         // in arrival order, names as sent
  std::string body;            // whole body (at most max_body_bytes)
  std::string remote_address;  // "ip:port" of the peer

  // Value of the first header named `name` (ASCII case-insensitive); empty
  // when absent.
  std::string_view header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;                               // 200..999, else sent as 500
  std::string content_type = "application/json";  // empty: no Content-Type
  HttpHeaders headers;                            // extra; CR/LF-bearing ones dropped
  std::string body;                               // dropped for 204 and 304
};

// The OpenAI error shape: {"error":{"message":...,"type":...,"code":status}}.
// `type` is e.g. "invalid_request_error" or "server_error".
HttpResponse JsonError(int status, const std::string& message, const std::string& type);

// How a handler answers: either one Reply(), or BeginStream(), any number of
// Write()s and End(). An interface so that route handlers can be tested with a
// fake responder, without sockets.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;

  // Sends a complete response, framed by Content-Length. Returns false when
  // the client is gone or something was already sent (then nothing is sent).
  virtual bool Reply(HttpResponse response) = 0;
  // Sends the status line and headers of a chunked response. Returns false as
  // Reply does. `headers` must not contain framing headers (Content-Length,
  // Transfer-Encoding).
  virtual bool BeginStream(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  // Sends `chunk` as one HTTP chunk (empty: nothing is sent). Returns false
  // once the client has disconnected (or no stream is open); the handler
  // should then stop producing and return.
  virtual bool Write(std::string_view chunk) = 0;
  // Terminates the chunked body. Optional: returning from the handler ends an
  // open stream. Returns false when the terminator could not be sent.
  virtual bool End() = 0;

  // True once the client is known to be gone. Thread-safe.
  virtual bool Disconnected() const = 0;
  // Runs `callback` once if the client disconnects before the handler returns:
  // on an IO thread, or right away on the calling thread when already
  // disconnected. On an IO thread it must not block nor call the responder's
  // sending methods (e.g. it posts a cancel to the scheduler's inbox). Never
  // runs after the handler has returned: the server waits for a running
  // callback before finishing the exchange. Thread-safe.
  virtual void OnDisconnect(std::function<void()> callback) = 0;
};

// A handler that returns without sending anything gets a 500 sent for it; one
// that throws gets a 500 (or a closed connection, if it had begun a stream).
using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

// kProbe: a health or readiness check (/health, /ready, /metrics), also
// served when max_connections are taken (see "Probes" above). A probe handler
// must be quick and must not need a request body.
enum class RouteKind { kNormal, kProbe };

// A check of a request's line and headers before its body is read (the API
// key): the response to send instead, or nullopt to go on. A refused
// request's body is never read and its connection closes, so an
// unauthenticated client cannot make the server hold megabytes of body
// (issue 46). Runs on an IO thread: quick, non-blocking, thread-safe.
// `head` has everything but the body.
using HttpGate = std::function<std::optional<HttpResponse>(const HttpRequest& head)>;

// A handler with the gate its requests pass first (RequireApiKey makes them).
struct GatedHandler {
  HttpHandler handler;
  HttpGate gate;  // may be empty: no gate
};

// Exact-match routes. Built before Start(), read-only afterwards.
class Router {
 public:
  // Routes `method` `path` to `handler`, replacing an earlier route for both.
  void Handle(std::string method, std::string path, HttpHandler handler, RouteKind kind = RouteKind::kNormal);
  // The same, with the gate the request's headers pass before its body is read.
  void Handle(std::string method, std::string path, GatedHandler route, RouteKind kind = RouteKind::kNormal);
  // Routes every method on `path` that has no Handle() route of its own.
  void HandleAny(std::string path, HttpHandler handler, RouteKind kind = RouteKind::kNormal);

  // The handler for (method, path), or nullptr: then `allow` is left empty
  // when the path is unknown (404) and set to the path's methods, e.g.
  // "GET, POST", when only the method is wrong (405). `kind`, when not null,
  // gets the route's kind (kNormal when there is no route).
  const HttpHandler* Find(std::string_view method, std::string_view path, std::string* allow,
                          RouteKind* kind = nullptr) const;
  // The gate of the route (method, path) would take, or nullptr (no route, or no gate).
  const HttpGate* Gate(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::string method;  // empty for `any`
    HttpHandler handler;
    RouteKind kind = RouteKind::kNormal;
    HttpGate gate;
  };
  const Route* FindRoute(std::string_view method, std::string_view path) const;
  struct PathRoutes {
    std::vector<Route> by_method;  // registration order
    Route any;                     // handler may be empty
  };
  std::map<std::string, PathRoutes, std::less<>> paths_;
};

struct HttpServerOptions {
  std::string host = "0.0.0.0";             // address or host name to bind
  int port = 8080;                          // 0: an ephemeral port, see port()
  int threads = 2;                          // IO threads (handlers run elsewhere)
  size_t max_body_bytes = 8 << 20;          // larger request bodies get 413
  int max_connections = 512;                // beyond it (and the probe reserve) 503
  int max_connections_per_client = 64;      // per peer address, beyond it 503; 0: no limit
  int probe_connections = 32;               // reserve for probe routes beyond max_connections
  std::chrono::seconds header_timeout{10};  // request line + headers; see "Timeouts" above
  std::chrono::seconds idle_timeout{60};    // see "Timeouts" above
};

class HttpServer {
 public:
  // Binds host:port and starts serving `routes`. INVALID_ARGUMENT for a bad
  // option (the field named); UNAVAILABLE naming host:port when binding fails.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, Router routes);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // NOLINT(bugprone-exception-escape): Stop()s (see ~ServerState)

  // The bound port (the ephemeral one when options.port was 0).
  int port() const;
  // Handlers running or queued (streaming responses until their last
  // write): what an exit waits for before it closes the connections.
  size_t busy_handlers() const;

  // Stops accepting, closes every connection (so streaming handlers see
  // Write() == false and Disconnected()), waits for running handlers to return
  // and joins all threads. Idempotent; concurrent callers wait for the first.
  // REQUIRES: not called from a handler or an OnDisconnect callback.
  void Stop();

 private:
  explicit HttpServer(std::unique_ptr<http_internal::ServerState> state);
  std::unique_ptr<http_internal::ServerState> state_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_HTTP_HTTP_SERVER_H_
