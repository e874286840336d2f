#include "loadtest/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace beacon::loadtest {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::chrono::milliseconds Ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1e3)); }

http::request<http::string_body> MakeRequest(const HttpUrl& url, http::verb verb, absl::string_view path,
                                             std::string body, const std::string& api_key) {
  http::request<http::string_body> req{verb, url.prefix + std::string(path), 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "beacon-loadtest");
  req.set(http::field::connection, "close");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
  }
  req.prepare_payload();
  return req;
}

absl::Status TransportError(const beast::error_code& ec, const std::string& where) {
  if (ec == beast::error::timeout) return absl::DeadlineExceededError(absl::StrCat(where, ": timed out"));
  if (ec == asio::error::operation_aborted) return absl::CancelledError(absl::StrCat(where, ": cancelled"));
  return absl::UnavailableError(absl::StrCat(where, ": ", ec.message()));
}

}  // namespace

std::string HttpUrl::ToString() const { return absl::StrCat("http://", host, ":", port, prefix); }

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url, absl::string_view flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", why, " in '", url, "' (expected http://HOST[:PORT][/PREFIX])"));
  };
  absl::string_view rest = url;
  if (absl::StartsWithIgnoreCase(rest, "https://")) {
    return absl::UnimplementedError(absl::StrCat(flag, ": https is not supported by the OpenAI backends ('", url,
                                                 "'): use http:// behind a TLS proxy"));
  }
  if (!absl::ConsumePrefix(&rest, "http://")) return bad("the URL must start with http://");
  HttpUrl out;
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  while (absl::ConsumeSuffix(&path, "/")) {}
  // A URL ending in /v1 names the API root: the paths add /v1 themselves.
  absl::ConsumeSuffix(&path, "/v1");
  out.prefix = std::string(path);
  if (authority.empty()) return bad("no host");
  if (authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("unclosed '['");
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && !absl::ConsumePrefix(&authority, ":")) return bad("junk after ']'");
    if (!authority.empty()) out.port = std::string(authority);
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) out.port = std::string(authority.substr(colon + 1));
  }
  int port = 0;
  if (out.host.empty()) return bad("no host");
  if (!absl::SimpleAtoi(out.port, &port) || port < 1 || port > 65535) return bad("the port must be 1..65535");
  return out;
}

absl::StatusOr<HttpReply> HttpFetch(const HttpUrl& url, absl::string_view method, absl::string_view path,
                                    const std::string& body, const std::string& api_key, double timeout_s) {
  const std::string where = absl::StrCat(method, " ", url.ToString(), path);
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buf;
  http::request<http::string_body> req =
      MakeRequest(url, method == "GET" ? http::verb::get : http::verb::post, path, body, api_key);
  http::response<http::string_body> resp;
  beast::error_code result;
  tcp::resolver resolver(ioc);
  stream.expires_after(Ms(timeout_s));
  resolver.async_resolve(url.host, url.port, [&](beast::error_code ec, tcp::resolver::results_type eps) {
    if (ec) return void(result = ec);
    stream.async_connect(eps, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return void(result = ec);
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec) return void(result = ec);
        http::async_read(stream, buf, resp, [&](beast::error_code ec, size_t) { result = ec; });
      });
    });
  });
  ioc.run();
  if (result) return TransportError(result, where);
  return HttpReply{static_cast<int>(resp.result_int()), std::move(resp.body())};
}

struct HttpStreamPool::Impl {
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  HttpUrl url;
  tcp::resolver::results_type endpoints;
};

namespace {

// One streamed POST on its own strand: connect, write, read the header, then
// the body piece by piece into a fixed buffer. Kept alive by its pending
// handlers (shared_from_this).
class Call final : public HttpStream, public std::enable_shared_from_this<Call> {
 public:
  Call(HttpStreamPool::Impl* pool, http::request<http::string_body> req, double timeout_s, HttpStreamHandlers h)
      : pool_(pool),
        stream_(asio::make_strand(pool->ioc)),
        req_(std::move(req)),
        timeout_s_(timeout_s),
        h_(std::move(h)) {
    // Unlimited (a stream's length is unknown). Not boost::none: Boost 1.74
    // compares a Content-Length against an empty optional as exceeding it.
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  }

  void Go() {
    stream_.expires_after(Ms(timeout_s_));  // one deadline for the whole request
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      self->stream_.async_connect(self->pool_->endpoints,
                                  [self](beast::error_code ec, const tcp::endpoint&) { self->OnConnect(ec); });
    });
  }

  void Cancel() override {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      self->cancelled_ = true;
      self->stream_.cancel();
    });
  }

 private:
  void OnConnect(beast::error_code ec) {
    if (ec) return Done(ec);
    http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Done(ec);
      http::async_read_header(self->stream_, self->buf_, self->parser_,
                              [self](beast::error_code ec, size_t) { self->OnHeader(ec); });
    });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return Done(ec);
    if (h_.on_status) h_.on_status(static_cast<int>(parser_.get().result_int()));
    ReadSome();
  }

  void ReadSome() {
    if (parser_.is_done()) return Done({});
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof(chunk_);
    http::async_read_some(stream_, buf_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec == http::error::need_buffer) ec = {};
      const size_t n = sizeof(self->chunk_) - self->parser_.get().body().size;
      if (n > 0 && self->h_.on_body) self->h_.on_body(absl::string_view(self->chunk_, n));
      if (ec) return self->Done(ec);
      self->ReadSome();
    });
  }

  void Done(beast::error_code ec) {
    if (done_) return;
    done_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    absl::Status s = absl::OkStatus();
    if (cancelled_) {
      s = absl::CancelledError("cancelled");
    } else if (ec) {
      s = TransportError(ec, absl::StrCat("POST ", pool_->url.ToString(), std::string(req_.target())));
    }
    h_.on_done(s);
  }

  HttpStreamPool::Impl* pool_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  http::request<http::string_body> req_;
  http::response_parser<http::buffer_body> parser_;
  char chunk_[16384];
  double timeout_s_;
  HttpStreamHandlers h_;
  bool cancelled_ = false, done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpStreamPool>> HttpStreamPool::Create(const HttpUrl& url, int threads) {
  auto impl = std::make_unique<Impl>();
  impl->url = url;
  beast::error_code ec;
  tcp::resolver resolver(impl->ioc);
  impl->endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve ", url.host, " (--server): ", ec.message()));
  impl->work.emplace(asio::make_work_guard(impl->ioc));
  for (int i = 0; i < std::max(threads, 1); ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  return std::unique_ptr<HttpStreamPool>(new HttpStreamPool(std::move(impl)));
}

HttpStreamPool::HttpStreamPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpStreamPool::~HttpStreamPool() {
  impl_->work.reset();
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
}

std::shared_ptr<HttpStream> HttpStreamPool::Post(absl::string_view path, std::string body, const std::string& api_key,
                                                 double timeout_s, HttpStreamHandlers handlers) {
  auto call =
      std::make_shared<Call>(impl_.get(), MakeRequest(impl_->url, http::verb::post, path, std::move(body), api_key),
                             timeout_s, std::move(handlers));
  call->Go();
  return call;
}

}  // namespace beacon::loadtest
