// The server's public surface: routing, error bodies, binding, the accept loop
// and the shutdown order. Connections live in http_connection.cc.
#include "server/http/http_server.h"

#include <boost/asio.hpp>
#include <future>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http/http_connection.h"

namespace beacon {
namespace http_internal {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

std::string JsonQuote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

// The shared part comes first so that it outlives the io_context: destroying
// the io_context destroys the handlers it still holds, and with them the last
// connections, which unregister themselves from ServerShared.
class ServerState : public ServerShared {
 public:
  ServerState(const HttpServerOptions& o, Router r) : ServerShared(o, std::move(r)), ioc(o.threads) {}
  // Stop() can throw only std::system_error (a thread that cannot be joined)
  // or std::bad_alloc; neither leaves a state a destructor could recover
  // from, so std::terminate is the outcome we want.
  ~ServerState() { Stop(); }  // NOLINT(bugprone-exception-escape)

  void Accept() {  // on accept_strand
    acceptor.async_accept(asio::make_strand(ioc), [this](ErrorCode ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;  // Stop()
      if (ec) {                         // e.g. out of file descriptors: back off instead of spinning
        accept_retry.expires_after(std::chrono::milliseconds(100));
        accept_retry.async_wait([this](ErrorCode ec) {
          if (!ec) Accept();
        });
        return;
      }
      ServeConnection(this, std::move(socket));
      Accept();
    });
  }

  // Accepting ends first, then every connection is closed so that handlers
  // see the disconnect and return, then the handler threads and the IO
  // threads are joined: a handler never outlives the IO it writes through.
  void Stop() {
    std::call_once(stop_once, [this] {
      if (threads.empty()) return;  // Start() failed before serving
      auto closed = std::make_shared<std::promise<void>>();
      std::future<void> acceptor_closed = closed->get_future();
      asio::post(accept_strand, [this, closed] {
        ErrorCode ec;
        acceptor.close(ec);
        accept_retry.cancel();
        closed->set_value();
      });
      acceptor_closed.wait();
      StopConnections(this);
      pool.StopAndJoin();
      work.reset();
      ioc.stop();
      for (auto& t : threads) t.join();
    });
  }

  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(ioc)};
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer accept_retry{accept_strand};
  std::vector<std::thread> threads;  // IO threads
  int port = 0;
  std::once_flag stop_once;
};

}  // namespace http_internal

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (absl::EqualsIgnoreCase(k, absl::string_view(name.data(), name.size()))) return v;
  }
  return {};
}

HttpResponse JsonError(int status, const std::string& message, const std::string& type) {
  HttpResponse r;
  r.status = status;
  r.body = absl::StrCat(R"({"error":{"message":)", http_internal::JsonQuote(message), R"(,"type":)",
                        http_internal::JsonQuote(type), R"(,"code":)", status, "}}");
  return r;
}

void Router::Handle(std::string method, std::string path, HttpHandler handler, RouteKind kind) {
  Handle(std::move(method), std::move(path), GatedHandler{std::move(handler), nullptr}, kind);
}

void Router::Handle(std::string method, std::string path, GatedHandler route, RouteKind kind) {
  auto& routes = paths_[std::move(path)].by_method;
  for (Route& r : routes) {
    if (r.method == method) {
      r.handler = std::move(route.handler);
      r.kind = kind;
      r.gate = std::move(route.gate);
      return;
    }
  }
  routes.push_back(Route{std::move(method), std::move(route.handler), kind, std::move(route.gate)});
}

void Router::HandleAny(std::string path, HttpHandler handler, RouteKind kind) {
  paths_[std::move(path)].any = Route{"", std::move(handler), kind, nullptr};
}

const Router::Route* Router::FindRoute(std::string_view method, std::string_view path) const {
  auto it = paths_.find(path);
  if (it == paths_.end()) return nullptr;
  for (const Route& r : it->second.by_method) {
    if (r.method == method) return &r;
  }
  return it->second.any.handler ? &it->second.any : nullptr;
}

const HttpGate* Router::Gate(std::string_view method, std::string_view path) const {
  const Route* r = FindRoute(method, path);
  return r != nullptr && r->gate ? &r->gate : nullptr;
}

const HttpHandler* Router::Find(std::string_view method, std::string_view path, std::string* allow,
                                RouteKind* kind) const {
  allow->clear();
  if (kind != nullptr) *kind = RouteKind::kNormal;
  auto it = paths_.find(path);
  if (it == paths_.end()) return nullptr;
  const Route* found = FindRoute(method, path);
  if (found != nullptr) {
    if (kind != nullptr) *kind = found->kind;
    return &found->handler;
  }
  for (const Route& r : it->second.by_method) absl::StrAppend(allow, allow->empty() ? "" : ", ", r.method);
  return nullptr;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, Router routes) {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HttpServerOptions.port must be in [0, 65535], got ", options.port));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("HttpServerOptions.threads must be >= 1, got ", options.threads));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HttpServerOptions.max_connections must be >= 1, got ", options.max_connections));
  }
  if (options.max_connections_per_client < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HttpServerOptions.max_connections_per_client must be >= 0 (0: no limit), got ",
                     options.max_connections_per_client));
  }
  if (options.probe_connections < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HttpServerOptions.probe_connections must be >= 0, got ", options.probe_connections));
  }
  if (options.idle_timeout.count() < 1) {
    return absl::InvalidArgumentError("HttpServerOptions.idle_timeout must be at least 1s");
  }
  if (options.header_timeout.count() < 1) {
    return absl::InvalidArgumentError("HttpServerOptions.header_timeout must be at least 1s");
  }

  auto state = std::make_unique<http_internal::ServerState>(options, std::move(routes));
  const std::string where = absl::StrCat(options.host, ":", options.port);
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(options.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, static_cast<unsigned short>(options.port));
  } else {
    tcp::resolver resolver(state->ioc);
    auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP server: cannot resolve HttpServerOptions.host ", where, ": ", ec.message()));
    }
    endpoint = results.begin()->endpoint();
  }
  tcp::acceptor& acceptor = state->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) state->port = acceptor.local_endpoint(ec).port();
  if (ec) return absl::UnavailableError(absl::StrCat("HTTP server: cannot listen on ", where, ": ", ec.message()));

  state->work.emplace(state->ioc.get_executor());
  asio::dispatch(state->accept_strand, [s = state.get()] { s->Accept(); });
  for (int i = 0; i < options.threads; ++i) state->threads.emplace_back([s = state.get()] { s->ioc.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(state)));
}

HttpServer::HttpServer(std::unique_ptr<http_internal::ServerState> state) : state_(std::move(state)) {}
HttpServer::~HttpServer() { Stop(); }  // NOLINT(bugprone-exception-escape): see ~ServerState
int HttpServer::port() const { return state_->port; }
size_t HttpServer::busy_handlers() const { return state_->pool.busy(); }
void HttpServer::Stop() { state_->Stop(); }

}  // namespace beacon
