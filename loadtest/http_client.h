// A small HTTP/1.1 client on Boost.Beast for the OpenAI backends: URL
// parsing, a blocking request (model list, tokenize) and streamed POSTs
// whose body is handed over as it arrives (server-sent events), each on its
// own connection, over a pool of I/O threads.
//
// Plain http:// only; an https:// URL is UNIMPLEMENTED with a message (put a
// TLS-terminating proxy in front, or use the gRPC backend's --tls-ca).
#ifndef BEACON_LOADTEST_HTTP_CLIENT_H_
#define BEACON_LOADTEST_HTTP_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace beacon::loadtest {

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // path before /v1/..., without a trailing '/' ("" or "/openai")
  std::string ToString() const;
};

// http://HOST[:PORT][/PREFIX]; errors name `flag` and what is wrong.
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url, absl::string_view flag = "--server");

struct HttpReply {
  int status = 0;
  std::string body;
};

// One blocking request (Connection: close) within `timeout_s`. A transport
// failure is UNAVAILABLE (DEADLINE_EXCEEDED past the timeout) naming the URL;
// an HTTP error status is returned, not an error.
absl::StatusOr<HttpReply> HttpFetch(const HttpUrl& url, absl::string_view method, absl::string_view path,
                                    const std::string& body, const std::string& api_key, double timeout_s);

// What a streamed request reports, in order, on one of the pool's threads:
// on_status once the header arrived, on_body for each piece of the body,
// on_done exactly once: OK when the body ended, CANCELLED after Cancel(),
// DEADLINE_EXCEEDED past the timeout, UNAVAILABLE for a transport error.
struct HttpStreamHandlers {
  std::function<void(int status)> on_status;
  std::function<void(absl::string_view bytes)> on_body;
  std::function<void(const absl::Status&)> on_done;
};

class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Thread-safe; the stream still ends through on_done.
  virtual void Cancel() = 0;
};

class HttpStreamPool {
 public:
  // Resolves the URL's host once (an error names it) and starts `threads` I/O threads.
  static absl::StatusOr<std::unique_ptr<HttpStreamPool>> Create(const HttpUrl& url, int threads);
  // REQUIRES: every stream has reported on_done.
  ~HttpStreamPool();

  // Starts a POST of a JSON `body` to url.prefix + path; never blocks.
  std::shared_ptr<HttpStream> Post(absl::string_view path, std::string body, const std::string& api_key,
                                   double timeout_s, HttpStreamHandlers handlers);

  struct Impl;

 private:
  explicit HttpStreamPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_HTTP_CLIENT_H_
