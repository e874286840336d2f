// The per-connection HTTP/1.1 state machine. Every Connection member below
// the "strand only" mark is touched only on the connection's strand; handler
// threads reach a connection by posting to that strand and waiting for the
// completion (ResponderImpl::Run). A request's life on the strand:
// Start or ReadRequest (idle wait for the first byte) -> ReadHeader (header
// deadline) -> OnHeader (100-continue; the probe reserve's route check) ->
// OnRequest -> [handler thread; watch read for disconnects; writes posted by
// the responder] -> HandlerDone -> ReadRequest (keep-alive) or Linger (close).
#include "server/http/http_connection.h"

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <future>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/http/http_message.h"

namespace beacon::http_internal {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;
using Done = std::function<void(bool ok)>;

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;   // request line + headers
constexpr size_t kMaxPipelinedBytes = 64 * 1024;  // read ahead while a handler runs
constexpr auto kLingerTimeout = std::chrono::seconds(3);
// Bounds every step of a connection that holds no max_connections slot (the
// probe reserve, 503s): a probe request arrives in one packet, and an attacker
// must not hold these connections.
constexpr auto kShortTimeout = std::chrono::seconds(2);
constexpr auto kNever = Clock::time_point::max();

// Whether `msg` asks for a RouteKind::kProbe route.
bool IsProbe(const Router& router, const http::request_header<>& msg) {
  const std::string_view method(msg.method_string().data(), msg.method_string().size());
  const std::string_view target(msg.target().data(), msg.target().size());
  std::string allow;
  RouteKind kind;
  return router.Find(method, target.substr(0, target.find('?')), &allow, &kind) != nullptr && kind == RouteKind::kProbe;
}

// The request line and headers of `msg` as an HttpRequest without a body.
void FillRequestHead(const http::request_header<>& msg, const std::string& remote, HttpRequest* req) {
  req->method = std::string(msg.method_string());
  req->target = std::string(msg.target());
  const size_t q = req->target.find('?');
  req->path = req->target.substr(0, q);
  if (q != std::string::npos) req->query = req->target.substr(q + 1);
  for (const auto& field : msg) req->headers.emplace_back(field.name_string(), field.value());
  req->remote_address = remote;
}

}  // namespace

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `ticket` is given back when the connection dies (the last handler
  // referring to it is gone).
  Connection(ServerShared* server, tcp::socket socket, AdmissionTicket ticket, std::string remote)
      : server_(server),
        socket_(std::move(socket)),
        ex_(socket_.get_executor()),
        ticket_(std::move(ticket)),
        slot_(ticket_.slot()),
        remote_(std::move(remote)),
        short_timeout_(std::min<Clock::duration>(server->options.header_timeout, kShortTimeout)),
        timer_(ex_) {
    ErrorCode ec;
    socket_.set_option(tcp::no_delay(true), ec);  // a streamed token must not wait for an ACK (Nagle)
  }
  ~Connection() {
    MutexLock lock(&server_->mu);
    server_->connections.erase(this);
  }
  const asio::any_io_executor& executor() const { return ex_; }

  // The rest runs on the strand only.
  // The first request's line and headers are due within header_timeout of the
  // accept (and idle_timeout, for a client that sends nothing); in the probe
  // reserve, the whole request within short_timeout_.
  void Start() {
    const auto first = slot_ == Slot::kReserve
                           ? short_timeout_
                           : std::min<Clock::duration>(server_->options.header_timeout, server_->options.idle_timeout);
    ReadHeader(Clock::now() + first);
  }
  void Reject() { SendInline(JsonError(503, ticket_.refusal(), "server_error"), false); }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ErrorCode ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    timer_.cancel();
    if (signal_) signal_->Disconnect();
  }

  // Writes bounded by idle_timeout (short_timeout_ without a max_connections
  // slot): a client that stops reading is dropped. `keep` owns what the write
  // refers to until it completes.
  template <class StartOp>
  void Write(StartOp start, std::shared_ptr<const void> keep, Done done) {
    if (closed_) return done(false);
    SetDeadline(Clock::now() + StepTimeout(server_->options.idle_timeout));
    start([self = shared_from_this(), keep = std::move(keep), done = std::move(done)](ErrorCode ec, size_t) {
      self->SetDeadline(kNever);
      if (ec) self->Close();
      done(!ec);
    });
  }
  void WriteMessage(std::shared_ptr<PlainMessage> msg, Done done) {
    Write([this, &msg](auto h) { http::async_write(socket_, *msg, std::move(h)); }, msg, std::move(done));
  }
  void WriteHead(std::shared_ptr<StreamHead> head, Done done) {
    Write([this, &head](auto h) { http::async_write_header(socket_, *head->sr, std::move(h)); }, head, std::move(done));
  }
  // `data` null: the last chunk.
  void WriteChunk(std::shared_ptr<std::string> data, Done done) {
    if (!data) {
      return Write([this](auto h) { asio::async_write(socket_, http::make_chunk_last(), std::move(h)); }, nullptr,
                   std::move(done));
    }
    Write([this, &data](auto h) { asio::async_write(socket_, http::make_chunk(asio::buffer(*data)), std::move(h)); },
          data, std::move(done));
  }

  // The running handler returned (its response complete unless !keep_alive).
  void HandlerDone(bool keep_alive) {
    signal_.reset();
    if (closed_) return;
    keep_alive = keep_alive && !server_->stopping.load();
    if (watching_) {  // one read at a time: stop the watch first
      after_watch_ = keep_alive ? AfterWatch::kRead : AfterWatch::kLinger;
      ErrorCode ec;
      socket_.cancel(ec);
      return;
    }
    keep_alive ? ReadRequest() : Linger();
  }

 private:
  enum class AfterWatch { kWatch, kRead, kLinger };

  void SetDeadline(Clock::time_point t) {
    timer_.expires_at(t);  // cancels the pending wait
    if (t == kNever) return;
    timer_.async_wait([self = shared_from_this()](ErrorCode ec) {
      // A stale wait (the deadline moved since) finds the expiry in the future.
      if (ec != asio::error::operation_aborted && self->timer_.expiry() <= Clock::now()) self->Close();
    });
  }

  Clock::duration StepTimeout(Clock::duration normal) const {
    return slot_ == Slot::kNormal ? normal : std::min(normal, short_timeout_);
  }

  // Between keep-alive requests: waiting idle is allowed for idle_timeout;
  // the header deadline starts with the next request's first byte.
  void ReadRequest() {
    if (closed_) return;
    const auto header_timeout = server_->options.header_timeout;
    if (buffer_.size() > 0) return ReadHeader(Clock::now() + header_timeout);  // pipelined: begun
    SetDeadline(Clock::now() + server_->options.idle_timeout);
    auto on_first_byte = [self = shared_from_this(), header_timeout](ErrorCode ec, size_t n) {
      self->buffer_.commit(n);
      if (ec) return self->Close();  // clean close between requests, reset, timeout or Stop()
      self->ReadHeader(Clock::now() + header_timeout);
    };
    socket_.async_read_some(buffer_.prepare(4096), std::move(on_first_byte));
  }

  // Request line and headers by `deadline`, however slowly they trickle in.
  void ReadHeader(Clock::time_point deadline) {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(server_->options.max_body_bytes);
    request_deadline_ = deadline;
    SetDeadline(deadline);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](ErrorCode ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(ErrorCode ec) {
    if (ec) return FailRequest(ec);
    // The probe reserve serves probes only: no other route's body is read.
    if (slot_ == Slot::kReserve && !IsProbe(server_->router, parser_->get())) {
      return SendInline(JsonError(503, ticket_.refusal(), "server_error"), false);
    }
    // The route's gate (the API key) sees the headers before any body byte
    // is read: a refused request's body is never read, and the connection
    // closes (its unread body would otherwise be taken for the next request).
    {
      const auto& msg = parser_->get();
      const std::string_view target(msg.target().data(), msg.target().size());
      const HttpGate* gate = server_->router.Gate(
          std::string_view(msg.method_string().data(), msg.method_string().size()), target.substr(0, target.find('?')));
      if (gate != nullptr) {
        HttpRequest head;
        FillRequestHead(msg, remote_, &head);
        if (std::optional<HttpResponse> refused = (*gate)(head); refused.has_value()) {
          return SendInline(std::move(*refused), /*keep_alive=*/false);
        }
      }
    }
    // The body is due within idle_timeout; the probe reserve's by the request's deadline.
    auto read_body = [self = shared_from_this()](bool ok) {
      if (!ok) return;
      self->SetDeadline(self->slot_ == Slot::kReserve ? self->request_deadline_
                                                      : Clock::now() + self->server_->options.idle_timeout);
      http::async_read(self->socket_, self->buffer_, *self->parser_,
                       [self](ErrorCode ec, size_t) { self->OnRequest(ec); });
    };
    if (!boost::beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      return read_body(true);
    }
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    Write([this, &cont](auto h) { http::async_write(socket_, *cont, std::move(h)); }, cont, read_body);
  }

  void FailRequest(ErrorCode ec) {
    const auto& http_category = http::make_error_code(http::error::bad_target).category();
    if (ec == http::error::body_limit) {
      SendInline(JsonError(413, absl::StrCat("request body exceeds ", server_->options.max_body_bytes, " bytes"),
                           "invalid_request_error"),
                 false);
    } else if (ec == http::error::header_limit) {
      SendInline(JsonError(431, "request headers too large", "invalid_request_error"), false);
    } else if (ec.category() == http_category && ec != http::error::end_of_stream &&
               ec != http::error::partial_message) {
      SendInline(JsonError(400, absl::StrCat("malformed HTTP request: ", ec.message()), "invalid_request_error"),
                 false);
    } else {
      Close();  // clean close between requests, reset, timeout or Stop()
    }
  }

  void OnRequest(ErrorCode ec);  // below ResponderImpl, which it runs

  void SendInline(HttpResponse r, bool keep_alive) {
    WriteMessage(MakeMessage(std::move(r), keep_alive),
                 [self = shared_from_this(), keep_alive](bool ok) { self->HandlerDone(ok && keep_alive); });
  }

  // While a handler runs: a read that notices the client leaving.
  void StartWatch() {
    if (closed_ || buffer_.size() >= kMaxPipelinedBytes) return;
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](ErrorCode ec, size_t n) { self->OnWatch(ec, n); });
  }
  void OnWatch(ErrorCode ec, size_t n) {
    watching_ = false;
    buffer_.commit(n);  // a pipelined request, kept for ReadRequest
    const AfterWatch next = std::exchange(after_watch_, AfterWatch::kWatch);
    if (closed_) return;
    if (ec && ec != asio::error::operation_aborted) return Close();  // EOF or reset: the client is gone
    if (next == AfterWatch::kRead) return ReadRequest();
    if (next == AfterWatch::kLinger) return Linger();
    StartWatch();
  }

  // Closes after sending "Connection: close" without resetting the peer: stop
  // sending, then read and drop what the client still sends for a while.
  void Linger() {
    if (closed_) return;
    ErrorCode ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    SetDeadline(Clock::now() + StepTimeout(std::min<Clock::duration>(server_->options.idle_timeout, kLingerTimeout)));
    Drain();
  }
  void Drain() {
    socket_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](ErrorCode ec, size_t) { ec ? self->Close() : self->Drain(); });
  }

  ServerShared* const server_;
  tcp::socket socket_;
  const asio::any_io_executor ex_;  // the strand
  const AdmissionTicket ticket_;
  const Slot slot_;
  const std::string remote_;             // "ip:port"
  const Clock::duration short_timeout_;  // min(header_timeout, kShortTimeout)
  // Strand only.
  asio::steady_timer timer_;
  Clock::time_point request_deadline_ = kNever;  // of the current request's header
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<DisconnectSignal> signal_;  // of the running handler
  bool closed_ = false;
  bool watching_ = false;
  AfterWatch after_watch_ = AfterWatch::kWatch;
  std::array<char, 4096> drain_;
};

namespace {

// Runs on a handler thread; blocks in Run() until the strand has written.
class ResponderImpl final : public HttpResponder {
 public:
  ResponderImpl(std::shared_ptr<Connection> connection, std::shared_ptr<DisconnectSignal> signal, bool keep_alive)
      : connection_(std::move(connection)), signal_(std::move(signal)), keep_alive_(keep_alive) {}

  bool Reply(HttpResponse response) override {
    if (phase_ != Phase::kNone) return false;
    phase_ = Phase::kDone;
    auto msg = MakeMessage(std::move(response), keep_alive());
    return Run([msg](Connection& s, Done done) { s.WriteMessage(msg, std::move(done)); });
  }
  bool BeginStream(int status, std::string content_type, HttpHeaders headers) override {
    if (phase_ != Phase::kNone) return false;
    phase_ = Phase::kStreaming;
    auto head = std::make_shared<StreamHead>();
    FillHead(head->res, status, content_type, headers, keep_alive());
    head->res.chunked(true);
    head->sr.emplace(head->res);
    return Run([head](Connection& s, Done done) { s.WriteHead(head, std::move(done)); });
  }
  bool Write(std::string_view chunk) override {
    if (phase_ != Phase::kStreaming || failed_) return false;
    if (chunk.empty()) return !Disconnected();
    auto data = std::make_shared<std::string>(chunk);
    return Run([data](Connection& s, Done done) { s.WriteChunk(data, std::move(done)); });
  }
  bool End() override {
    if (phase_ != Phase::kStreaming || failed_) return false;
    phase_ = Phase::kDone;
    return Run([](Connection& s, Done done) { s.WriteChunk(nullptr, std::move(done)); });
  }
  bool Disconnected() const override { return signal_->disconnected(); }
  void OnDisconnect(std::function<void()> callback) override { signal_->OnDisconnect(std::move(callback)); }

  void HandlerThrew(const char* what) {
    if (phase_ == Phase::kNone) {
      Reply(JsonError(500, absl::StrCat("handler failed: ", what), "server_error"));
    } else {
      failed_ = true;  // a truncated stream must not look complete
    }
  }
  // After the handler returned: completes what it left open, hands the
  // connection back to the strand.
  void Finish() {
    if (phase_ == Phase::kNone) Reply(JsonError(500, "handler sent no response", "server_error"));
    if (phase_ == Phase::kStreaming) End();
    signal_->Finish();
    const bool keep = keep_alive();
    auto connection = std::move(connection_);
    asio::post(connection->executor(), [connection, keep] { connection->HandlerDone(keep); });
  }

 private:
  enum class Phase { kNone, kStreaming, kDone };
  bool keep_alive() const { return keep_alive_ && !failed_; }

  bool Run(std::function<void(Connection&, Done)> op) {
    if (signal_->disconnected()) failed_ = true;
    if (failed_) return false;
    auto result = std::make_shared<std::promise<bool>>();
    std::future<bool> ok = result->get_future();
    asio::post(connection_->executor(),
               [s = connection_, op = std::move(op), result] { op(*s, [result](bool ok) { result->set_value(ok); }); });
    bool written = false;
    try {
      written = ok.get();
    } catch (const std::future_error&) {  // the strand dropped the work: closed
    }
    if (!written) failed_ = true;
    return written;
  }

  std::shared_ptr<Connection> connection_;
  const std::shared_ptr<DisconnectSignal> signal_;
  const bool keep_alive_;
  Phase phase_ = Phase::kNone;
  bool failed_ = false;
};

}  // namespace

void Connection::OnRequest(ErrorCode ec) {
  if (ec) return FailRequest(ec);
  SetDeadline(kNever);  // handlers are not timed
  auto& msg = parser_->get();
  auto req = std::make_shared<HttpRequest>();
  FillRequestHead(msg, remote_, req.get());
  req->body = std::move(msg.body());
  // HTTP/1.0 clients get one response per connection.
  // The probe reserve serves one request per connection.
  const bool keep_alive =
      msg.keep_alive() && msg.version() >= 11 && !server_->stopping.load() && slot_ != Slot::kReserve;
  parser_.reset();

  std::string allow;
  const HttpHandler* handler = server_->router.Find(req->method, req->path, &allow);
  if (handler == nullptr && allow.empty()) {
    return SendInline(
        JsonError(404, absl::StrCat("no route for ", req->method, " ", req->path), "invalid_request_error"),
        keep_alive);
  }
  if (handler == nullptr) {
    HttpResponse r =
        JsonError(405, absl::StrCat("method ", req->method, " not allowed on ", req->path), "invalid_request_error");
    r.headers.emplace_back("Allow", allow);
    return SendInline(std::move(r), keep_alive);
  }
  signal_ = std::make_shared<DisconnectSignal>();
  StartWatch();
  auto run = [connection = shared_from_this(), handler, req, signal = signal_, keep_alive]() mutable {
    ResponderImpl responder(std::move(connection), std::move(signal), keep_alive);
    try {
      (*handler)(*req, responder);
    } catch (const std::exception& e) {
      responder.HandlerThrew(e.what());
    } catch (...) {
      responder.HandlerThrew("unknown exception");
    }
    responder.Finish();
  };
  if (!server_->pool.Submit(std::move(run))) Close();  // stopping
}

void ServeConnection(ServerShared* shared, tcp::socket socket) {
  ErrorCode ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  std::string client, remote;  // empty when the peer is already gone: then not counted per client
  if (!ec) {
    client = peer.address().to_string();
    remote = absl::StrCat(client, ":", peer.port());
  }
  AdmissionTicket ticket = shared->limits.Admit(std::move(client));
  const bool admitted = ticket.slot() != Slot::kRejected;
  std::shared_ptr<Connection> connection;
  {
    MutexLock lock(&shared->mu);
    if (shared->stopping) return;  // StopConnections() has taken its snapshot
    connection = std::make_shared<Connection>(shared, std::move(socket), std::move(ticket), std::move(remote));
    shared->connections.emplace(connection.get(), connection);
  }
  asio::dispatch(connection->executor(),
                 [connection, admitted] { admitted ? connection->Start() : connection->Reject(); });
}

void StopConnections(ServerShared* shared) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    MutexLock lock(&shared->mu);
    shared->stopping = true;
    for (auto& [ptr, weak] : shared->connections) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
  }
  std::vector<std::future<void>> closed;
  for (auto& c : live) {
    auto done = std::make_shared<std::promise<void>>();
    closed.push_back(done->get_future());
    asio::post(c->executor(), [c, done] {
      c->Close();
      done->set_value();
    });
  }
  for (auto& f : closed) f.wait();
}

}  // namespace beacon::http_internal
