// HttpServer over real sockets on 127.0.0.1, driven by the raw-socket client
// of http_test_client.h. Waits are bounded (socket receive timeout,
// WaitOrDie) so that a regression fails instead of hanging; no test asserts a
// duration.
#include "server/http/http_server.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/http/http_test_client.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using test::Get;
using test::Post;
using test::RawClient;
using test::Response;
using test::WaitOrDie;

HttpHandler Echo() {
  return [](const HttpRequest& req, HttpResponder& out) { out.Reply({200, "text/plain", {}, req.body}); };
}

std::unique_ptr<HttpServer> StartServer(Router router, HttpServerOptions options = {}) {
  options.host = "127.0.0.1";
  options.port = 0;
  auto server = HttpServer::Start(options, std::move(router));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(RouterTest, TellsUnknownPathFromWrongMethod) {
  Router r;
  r.Handle("GET", "/a", Echo());
  r.Handle("PUT", "/a", Echo());
  r.HandleAny("/b", Echo());
  std::string allow;
  EXPECT_NE(r.Find("GET", "/a", &allow), nullptr);
  EXPECT_EQ(r.Find("POST", "/a", &allow), nullptr);
  EXPECT_EQ(allow, "GET, PUT");
  EXPECT_EQ(r.Find("GET", "/c", &allow), nullptr);
  EXPECT_EQ(allow, "");
  EXPECT_NE(r.Find("DELETE", "/b", &allow), nullptr);
}

TEST(RouterTest, ReportsTheRouteKind) {
  Router r;
  r.Handle("GET", "/health", Echo(), RouteKind::kProbe);
  r.Handle("POST", "/health", Echo());
  r.HandleAny("/any", Echo(), RouteKind::kProbe);
  std::string allow;
  RouteKind kind = RouteKind::kProbe;
  EXPECT_NE(r.Find("POST", "/health", &allow, &kind), nullptr);
  EXPECT_EQ(kind, RouteKind::kNormal);
  EXPECT_NE(r.Find("GET", "/health", &allow, &kind), nullptr);
  EXPECT_EQ(kind, RouteKind::kProbe);
  EXPECT_NE(r.Find("PUT", "/any", &allow, &kind), nullptr);
  EXPECT_EQ(kind, RouteKind::kProbe);
  EXPECT_EQ(r.Find("GET", "/nope", &allow, &kind), nullptr);
  EXPECT_EQ(kind, RouteKind::kNormal);
}

TEST(JsonErrorTest, OpenAiShapeEscaped) {
  const HttpResponse r = JsonError(400, "bad \"x\"\n\x01", "invalid_request_error");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"error":{"message":"bad \"x\"\n\u0001","type":"invalid_request_error","code":400}})");
}

TEST(HttpServerTest, BadOptionsAndBusyPortAreErrorsNamingTheCause) {
  HttpServerOptions bad;
  bad.port = 70000;
  auto s = HttpServer::Start(bad, Router());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("port"));
  auto server = StartServer(Router());
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);  // the ephemeral port actually bound
  EXPECT_TRUE(RawClient(server->port()).connected());
  HttpServerOptions same;
  same.host = "127.0.0.1";
  same.port = server->port();
  auto second = HttpServer::Start(same, Router());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("127.0.0.1:" + std::to_string(server->port())));
}

TEST(HttpServerTest, BadLimitOptionsAreErrorsNamingTheField) {
  auto expect_invalid = [](HttpServerOptions o, const char* field) {
    auto s = HttpServer::Start(o, Router());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(field));
  };
  HttpServerOptions o;
  o.header_timeout = 0s;
  expect_invalid(o, "header_timeout");
  o = {};
  o.max_connections_per_client = -1;
  expect_invalid(o, "max_connections_per_client");
  o = {};
  o.probe_connections = -1;
  expect_invalid(o, "probe_connections");
}

TEST(HttpServerTest, GetRouteAndErrorsKeepTheConnection) {
  Router r;
  r.Handle("GET", "/hello", [](const HttpRequest&, HttpResponder& out) {
    out.Reply({200, "text/plain", {{"X-Test", "1"}}, "world"});
  });
  r.Handle("PUT", "/hello", Echo());
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  auto ok = c.RoundTrip(Get("/hello"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "world");
  EXPECT_EQ(ok->headers["content-type"], "text/plain");
  EXPECT_EQ(ok->headers["content-length"], "5");
  EXPECT_EQ(ok->headers["x-test"], "1");
  auto missing = c.RoundTrip(Get("/nope"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->headers["content-type"], "application/json");
  EXPECT_EQ(missing->body, JsonError(404, "no route for GET /nope", "invalid_request_error").body);
  auto wrong = c.RoundTrip(Post("/hello", "x"));
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->headers["allow"], "GET, PUT");
  EXPECT_THAT(wrong->body, HasSubstr(R"("code":405)"));
}

TEST(HttpServerTest, OversizeBodyIs413AndNeverReachesTheHandler) {
  std::atomic<int> calls{0};
  Router r;
  r.Handle("POST", "/echo", [&](const HttpRequest& req, HttpResponder& out) {
    ++calls;
    out.Reply({200, "text/plain", {}, req.body});
  });
  HttpServerOptions options;
  options.max_body_bytes = 1024;
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  RawClient at_limit(server->port());
  auto accepted = at_limit.RoundTrip(Post("/echo", std::string(1024, 'a')));
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->status, 200);
  RawClient sized(server->port());
  auto too_big = sized.RoundTrip(Post("/echo", std::string(1025, 'a')));
  ASSERT_TRUE(too_big);
  EXPECT_EQ(too_big->status, 413);
  EXPECT_THAT(too_big->body, HasSubstr("invalid_request_error"));
  EXPECT_EQ(too_big->headers["connection"], "close");
  EXPECT_TRUE(sized.ReadsEof());
  RawClient chunked(server->port());
  auto chunked_too_big = chunked.RoundTrip("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                           ("800\r\n" + std::string(0x800, 'b') + "\r\n0\r\n\r\n"));
  ASSERT_TRUE(chunked_too_big);
  EXPECT_EQ(chunked_too_big->status, 413);
  EXPECT_EQ(calls.load(), 1);
}

// A gate (the API key) refuses on the headers alone: the 401 comes while the
// announced body is still unsent, the handler never runs and the connection
// closes; a request the gate lets in is read whole (issue 46).
TEST(HttpServerTest, GateRefusesBeforeTheBodyIsRead) {
  std::atomic<int> calls{0};
  Router r;
  GatedHandler route;
  route.handler = [&](const HttpRequest& req, HttpResponder& out) {
    ++calls;
    out.Reply({200, "text/plain", {}, std::to_string(req.body.size())});
  };
  route.gate = [](const HttpRequest& head) -> std::optional<HttpResponse> {
    if (head.header("authorization") == "Bearer k" && head.body.empty() && head.path == "/up") return std::nullopt;
    return HttpResponse{401, "text/plain", {}, "no"};
  };
  r.Handle("POST", "/up", std::move(route));
  HttpServerOptions options;
  options.max_body_bytes = 8 << 20;
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  // 8 MB announced, none of it sent: answered at once, not after the body.
  RawClient refused(server->port());
  ASSERT_TRUE(refused.Send("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 8000000\r\n\r\n"));
  auto no = refused.Read();
  ASSERT_TRUE(no);
  EXPECT_EQ(no->status, 401);
  EXPECT_EQ(no->headers["connection"], "close");
  EXPECT_TRUE(refused.ReadsEof());
  // With the key the body is read and the handler runs.
  RawClient allowed(server->port());
  ASSERT_TRUE(allowed.Send("POST /up HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer k\r\nContent-Length: 5\r\n\r\n"));
  ASSERT_TRUE(allowed.Send("hello"));
  auto yes = allowed.Read();
  ASSERT_TRUE(yes);
  EXPECT_EQ(yes->status, 200);
  EXPECT_EQ(yes->body, "5");
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpServerTest, MalformedRequestIs400AndCloses) {
  auto server = StartServer(Router());
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  auto r = c.RoundTrip("THIS IS NOT HTTP\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("malformed HTTP request"));
  EXPECT_TRUE(c.ReadsEof());
}

TEST(HttpServerTest, PostBodyAndRequestFieldsArriveIntact) {
  std::mutex mu;
  HttpRequest seen;
  Router r;
  r.Handle("POST", "/echo", [&](const HttpRequest& req, HttpResponder& out) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen = req;
    }
    out.Reply({200, "application/octet-stream", {}, req.body});
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  std::string body;
  for (int i = 0; i < 100000; ++i) body += static_cast<char>(i * 7 % 256);  // every byte value, NULs too
  RawClient c(server->port());
  auto resp = c.RoundTrip(Post("/echo?x=1&y=%20", body, "X-Custom: Value\r\n"));
  ASSERT_TRUE(resp);
  EXPECT_EQ(resp->status, 200);
  EXPECT_TRUE(resp->body == body);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(seen.body == body);
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/echo?x=1&y=%20");
  EXPECT_EQ(seen.path, "/echo");
  EXPECT_EQ(seen.query, "x=1&y=%20");
  EXPECT_EQ(seen.header("x-custom"), "Value");
  EXPECT_EQ(seen.header("X-CUSTOM"), "Value");
  EXPECT_EQ(seen.header("absent"), "");
  EXPECT_THAT(seen.remote_address, ::testing::StartsWith("127.0.0.1:"));
}

TEST(HttpServerTest, KeepAliveAndPipelining) {
  Router r;
  r.Handle("GET", "/who", [](const HttpRequest& req, HttpResponder& out) {
    out.Reply({200, "text/plain", {}, req.remote_address + " " + req.query});
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  auto first = c.RoundTrip(Get("/who?1"));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->headers.count("connection"), 0u);
  ASSERT_TRUE(c.Send(Get("/who?2") + Get("/who?3")));  // two requests in one write
  auto second = c.Read();
  auto third = c.Read();
  ASSERT_TRUE(second && third);
  const std::string peer = first->body.substr(0, first->body.find(' '));
  EXPECT_EQ(second->body, peer + " 2");  // same peer port: the same connection
  EXPECT_EQ(third->body, peer + " 3");
}

TEST(HttpServerTest, StreamArrivesAsChunksInOrderAndEndsProperly) {
  Router r;
  r.Handle("POST", "/stream", [](const HttpRequest&, HttpResponder& out) {
    out.BeginStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(out.Write("data: " + std::to_string(i) + "\n\n"));
    EXPECT_TRUE(out.Write(""));  // no chunk: would read as the terminator
    EXPECT_TRUE(out.End());
    EXPECT_FALSE(out.Write("late"));
  });
  r.Handle("GET", "/unended", [](const HttpRequest&, HttpResponder& out) {
    out.BeginStream(200, "text/plain");
    out.Write("a");  // returning ends the stream
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  auto resp = c.RoundTrip(Post("/stream", "{}"));
  ASSERT_TRUE(resp);
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->headers["transfer-encoding"], "chunked");
  EXPECT_EQ(resp->headers["content-type"], "text/event-stream");
  EXPECT_EQ(resp->headers["cache-control"], "no-cache");
  EXPECT_THAT(resp->chunks,
              ::testing::ElementsAre("data: 0\n\n", "data: 1\n\n", "data: 2\n\n", "data: 3\n\n", "data: 4\n\n"));
  ASSERT_TRUE(c.Send(Get("/unended")));  // the connection survives a stream
  auto unended = c.Read();
  ASSERT_TRUE(unended);
  EXPECT_THAT(unended->chunks, ::testing::ElementsAre("a"));
}

TEST(HttpServerTest, HandlerThatSendsNothingOrThrowsGets500) {
  Router r;
  r.Handle("GET", "/silent", [](const HttpRequest&, HttpResponder&) {});
  r.Handle("GET", "/throw", [](const HttpRequest&, HttpResponder&) { throw std::runtime_error("boom"); });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  auto silent = c.RoundTrip(Get("/silent"));
  ASSERT_TRUE(silent);
  EXPECT_EQ(silent->status, 500);
  auto threw = c.RoundTrip(Get("/throw"));
  ASSERT_TRUE(threw);
  EXPECT_EQ(threw->status, 500);
  EXPECT_THAT(threw->body, HasSubstr("boom"));
}

TEST(HttpServerTest, ExpectContinueGetsInterimResponse) {
  Router r;
  r.Handle("POST", "/echo", Echo());
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  auto interim = c.RoundTrip("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  auto final_response = c.RoundTrip("hello");
  ASSERT_TRUE(final_response);
  EXPECT_EQ(final_response->body, "hello");
}

// The client leaves mid-stream: Write turns false, OnDisconnect runs.
void ExpectDisconnectStopsStream(bool reset) {
  std::promise<void> handler_done;
  std::atomic<bool> callback_ran{false};
  Router r;
  r.Handle("GET", "/stream", [&](const HttpRequest&, HttpResponder& out) {
    out.OnDisconnect([&] { callback_ran = true; });
    out.BeginStream(200, "text/event-stream");
    while (out.Write("data: tick\n\n")) std::this_thread::sleep_for(2ms);
    EXPECT_TRUE(out.Disconnected());
    handler_done.set_value();
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  RawClient c(server->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  Response head;
  ASSERT_TRUE(c.ReadHead(head));
  reset ? c.Reset() : c.Close();
  auto done = handler_done.get_future();
  WaitOrDie(done, "Write() to return false after the client left");
  EXPECT_TRUE(callback_ran);
}
TEST(HttpServerTest, ClientCloseMidStreamFailsWrite) { ExpectDisconnectStopsStream(false); }
TEST(HttpServerTest, ClientResetMidStreamFailsWrite) { ExpectDisconnectStopsStream(true); }

TEST(HttpServerTest, DisconnectIsNoticedWhileHandlerWaitsWithoutWriting) {
  std::promise<void> started, gone, handler_done;
  Router r;
  r.Handle("POST", "/wait", [&](const HttpRequest&, HttpResponder& out) {
    out.OnDisconnect([&] { gone.set_value(); });  // e.g. cancel a queued generation
    started.set_value();
    gone.get_future().wait_for(60s);
    EXPECT_TRUE(out.Disconnected());
    EXPECT_FALSE(out.Reply({}));
    handler_done.set_value();
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  auto handler_started = started.get_future();
  auto handler_returned = handler_done.get_future();
  RawClient c(server->port());
  ASSERT_TRUE(c.Send(Post("/wait", "{}")));
  WaitOrDie(handler_started, "the handler to start");
  c.Close();
  WaitOrDie(handler_returned, "the disconnect callback");
}

TEST(HttpServerTest, StopWhileStreamingReturnsAndEndsTheStreamUnterminated) {
  std::atomic<bool> handler_returned{false};
  Router r;
  r.Handle("GET", "/forever", [&](const HttpRequest&, HttpResponder& out) {
    out.BeginStream(200, "text/event-stream");
    while (out.Write("x")) std::this_thread::sleep_for(2ms);
    handler_returned = true;
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  RawClient c(port);
  ASSERT_TRUE(c.Send(Get("/forever")));
  Response resp;
  ASSERT_TRUE(c.ReadHead(resp));
  auto stopped = std::async(std::launch::async, [&] { server->Stop(); });
  WaitOrDie(stopped, "Stop() with a stream active");
  EXPECT_TRUE(handler_returned);
  EXPECT_FALSE(c.ReadBody(resp));  // cut off, not terminated
  server->Stop();                  // idempotent
  EXPECT_FALSE(RawClient(port).connected());
}

TEST(HttpServerTest, IdleAndSlowlorisConnectionsAreClosed) {
  HttpServerOptions options;
  options.idle_timeout = 1s;
  auto server = StartServer(Router(), options);
  ASSERT_NE(server, nullptr);
  RawClient slow(server->port());
  ASSERT_TRUE(slow.Send("GET /hello HTTP/1.1\r\nHost: t\r\n"));  // and never the rest
  RawClient silent(server->port());
  EXPECT_TRUE(slow.ReadsEof());  // the client gives up only after 10 s
  EXPECT_TRUE(silent.ReadsEof());
}

TEST(HttpServerTest, ConnectionsBeyondTheCapGet503) {
  Router r;
  r.Handle("GET", "/hello", Echo());
  HttpServerOptions options;
  options.max_connections = 2;
  options.probe_connections = 0;  // else `over` would wait in the probe reserve for a request
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  RawClient a(server->port()), b(server->port());
  for (RawClient* c : {&a, &b}) {  // served, so surely registered
    ASSERT_TRUE(c->Send(Get("/hello")));
    ASSERT_TRUE(c->Read());
  }
  RawClient over(server->port());
  auto r503 = over.Read();
  ASSERT_TRUE(r503);
  EXPECT_EQ(r503->status, 503);
  EXPECT_THAT(r503->body, HasSubstr("server_error"));
}

// Sends `head` one byte per 100 ms from a thread until the server closes the
// connection or the test ends (a slowloris client).
class Trickler {
 public:
  Trickler(RawClient& c, std::string head)
      : thread_([this, &c, head = std::move(head)] {
          for (char ch : head) {
            if (stop_.load() || !c.Send(std::string_view(&ch, 1))) return;
            std::this_thread::sleep_for(100ms);
          }
        }) {}
  ~Trickler() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(HttpServerTest, SlowHeadersAreCutOffAtTheHeaderDeadlineNotTheIdleTimeout) {
  Router r;
  r.Handle("GET", "/hello", Echo());
  HttpServerOptions options;
  options.header_timeout = 1s;  // idle_timeout stays 60 s
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  RawClient slow(server->port());
  Trickler trickle(slow, "GET /hello HTTP/1.1\r\nHost: t\r\nX-Pad: " + std::string(200, 'a'));
  RawClient normal(server->port());
  auto first = normal.RoundTrip(Get("/hello"));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  RawClient silent(server->port());
  EXPECT_TRUE(slow.ReadsEof());  // within header_timeout; the client itself gives up after 10 s
  EXPECT_TRUE(silent.ReadsEof());
  // Idle between keep-alive requests for longer than header_timeout is fine.
  std::this_thread::sleep_for(1500ms);
  auto second = normal.RoundTrip(Get("/hello"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
}

// Polls (bounded) until a fresh connection from `source` gets 200 for
// `request`: slots are given back when the server has noticed a close.
bool EventuallyServed(int port, const std::string& request, const char* source = nullptr) {
  for (int i = 0; i < 200; ++i) {
    RawClient c(port, source);
    auto resp = c.RoundTrip(request);
    if (resp && resp->status == 200) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(HttpServerTest, PerClientCapRefusesOnlyThatClientsExtraConnection) {
  Router r;
  r.Handle("GET", "/hello", Echo());
  HttpServerOptions options;
  options.max_connections = 3;
  options.max_connections_per_client = 2;
  options.probe_connections = 0;
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  RawClient a(port), b(port);
  for (RawClient* c : {&a, &b}) {  // served, so surely registered
    auto resp = c->RoundTrip(Get("/hello"));
    ASSERT_TRUE(resp);
    EXPECT_EQ(resp->status, 200);
  }
  RawClient over(port);
  auto refused = over.Read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_THAT(refused->body, HasSubstr("max_connections_per_client is 2"));
  EXPECT_TRUE(over.ReadsEof());
  // The refused connection took none of the 3 slots: another address gets the third.
  RawClient other(port, "127.0.0.2");
  ASSERT_TRUE(other.connected());
  auto served = other.RoundTrip(Get("/hello"));
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
  a.Close();  // gives one of 127.0.0.1's two back
  EXPECT_TRUE(EventuallyServed(port, Get("/hello")));
}

// A kubelet probe often shares its address with client traffic (SNAT): a
// client at its cap still gets probes answered from the reserve (issue 35),
// and anything else on such a connection gets the per-client 503.
TEST(HttpServerTest, PerClientCapStillAnswersProbesFromTheReserve) {
  Router r;
  r.Handle("GET", "/health", Echo(), RouteKind::kProbe);
  r.Handle("GET", "/hello", Echo());
  HttpServerOptions options;
  options.max_connections = 8;
  options.max_connections_per_client = 2;
  options.probe_connections = 2;
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  RawClient slow1(port), slow2(port);  // the address's two, held by a slow client
  ASSERT_TRUE(slow1.Send("GET /hello HTTP/1.1\r\n") && slow2.Send("GET /hello HTTP/1.1\r\n"));
  EXPECT_TRUE(EventuallyServed(port, Get("/health")));  // the probe: 200 (closed after)
  RawClient over(port);
  auto refused = over.RoundTrip(Get("/hello"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_THAT(refused->body, HasSubstr("max_connections_per_client is 2"));
  // Another address is untouched.
  RawClient other(port, "127.0.0.2");
  auto served = other.RoundTrip(Get("/hello"));
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
}

TEST(HttpServerTest, ProbesAreServedWhenSlowClientsHoldEveryConnection) {
  Router r;
  r.Handle("GET", "/health", Echo(), RouteKind::kProbe);
  r.Handle("GET", "/hello", Echo());
  HttpServerOptions options;
  options.max_connections = 2;
  options.probe_connections = 1;  // header_timeout 10 s: the reserve's deadline is 2 s
  auto server = StartServer(std::move(r), options);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  RawClient slow1(port), slow2(port);  // accepted in order: they take max_connections
  ASSERT_TRUE(slow1.Send("GET /hello HTTP/1.1\r\n") && slow2.Send("GET /hello HTTP/1.1\r\n"));
  RawClient squatter(port);  // takes the reserve, sends nothing
  RawClient beyond(port);
  auto refused = beyond.RoundTrip(Get("/health"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);   // beyond the reserve
  EXPECT_TRUE(squatter.ReadsEof());  // nobody sits in the reserve
  // The squatter's reserve slot comes back; a probe is served on it, once.
  std::optional<Response> probe;
  for (int i = 0; i < 200 && !(probe && probe->status == 200); ++i) {
    std::this_thread::sleep_for(10ms);
    RawClient p(port);
    probe = p.RoundTrip(Get("/health"));
    if (probe && probe->status == 200) {
      EXPECT_EQ(probe->headers["connection"], "close");
      EXPECT_TRUE(p.ReadsEof());
    }
  }
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->status, 200);
  RawClient client(port);
  auto busy = client.RoundTrip(Get("/hello"));
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_THAT(busy->body, HasSubstr("too many connections"));
}

TEST(HttpServerTest, FiftyConcurrentClientsRunHandlersConcurrently) {
  constexpr int kClients = 50;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool gave_up = false;
  Router r;
  // Each handler waits until all have arrived: passes only if 50 handlers
  // block at once (far more than the 2 IO threads).
  r.Handle("GET", "/barrier", [&](const HttpRequest& req, HttpResponder& out) {
    std::unique_lock<std::mutex> lock(mu);
    ++arrived;
    cv.notify_all();
    const bool all = cv.wait_for(lock, 20s, [&] { return arrived >= kClients || gave_up; }) && !gave_up;
    gave_up = !all;
    cv.notify_all();
    lock.unlock();
    out.Reply({all ? 200 : 504, "text/plain", {}, std::string(req.header("X-Id"))});
  });
  auto server = StartServer(std::move(r));
  ASSERT_NE(server, nullptr);
  std::vector<int> served(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      RawClient c(server->port());
      if (!c.Send(Get("/barrier", "X-Id: " + std::to_string(i) + "\r\n"))) return;
      auto resp = c.Read();
      served[i] = resp && resp->status == 200 && resp->body == std::to_string(i);
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_THAT(served, ::testing::Each(1));
}

}  // namespace
}  // namespace beacon
