// A blocking HTTP/1.1 client on a raw socket for the server tests: sends exact
// bytes (malformed requests, resets) and parses the framing that comes back
// (Content-Length, chunked with each chunk kept, or read-to-EOF).
#ifndef BEACON_TESTS_SERVER_HTTP_HTTP_TEST_CLIENT_H_
#define BEACON_TESTS_SERVER_HTTP_HTTP_TEST_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace beacon::test {

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::vector<std::string> chunks;  // chunked responses only
};

// Every read gives up after 10 s, so a server that never answers fails a test.
// `source`: the local address to connect from, e.g. "127.0.0.2" to look like
// another client (Linux routes all of 127/8 to loopback); null: any.
class RawClient {
 public:
  explicit RawClient(int port, const char* source = nullptr) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (source != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, source, &local.sin_addr);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) return;  // not connected
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { Close(); }
  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Status line and headers. False on EOF, timeout or garbage.
  bool ReadHead(Response& r) {
    r = Response();
    auto status = Line();
    if (!status || std::sscanf(status->c_str(), "HTTP/1.%*d %d", &r.status) != 1) return false;
    for (auto line = Line(); line; line = Line()) {
      if (line->empty()) return true;
      const size_t colon = line->find(':');
      if (colon == std::string::npos) return false;
      std::string name = line->substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line->substr(line->find_first_not_of(' ', colon + 1));
    }
    return false;
  }
  // The body per the headers. False when cut short (e.g. no last chunk).
  bool ReadBody(Response& r) {
    if (r.status == 100) return true;
    if (r.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        auto size_line = Line();
        if (!size_line) return false;
        const size_t n = std::strtoul(size_line->c_str(), nullptr, 16);
        if (n == 0) return Line() == std::string();  // no trailers
        std::string chunk;
        if (!Take(n, &chunk) || Line() != std::string()) return false;
        r.body += chunk;
        r.chunks.push_back(std::move(chunk));
      }
    }
    if (r.headers.count("content-length")) return Take(std::stoul(r.headers["content-length"]), &r.body);
    while (Fill()) {}
    r.body = std::exchange(buf_, "");
    return true;
  }
  // Sends `request`, reads one response; nullopt when either fails.
  std::optional<Response> RoundTrip(std::string_view request) {
    if (!Send(request)) return std::nullopt;
    return Read();
  }
  std::optional<Response> Read() {
    Response r;
    if (!ReadHead(r) || !ReadBody(r)) return std::nullopt;
    return r;
  }
  // True when the server closed the connection (EOF or reset, not a timeout).
  bool ReadsEof() {
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  void Reset() {  // close with RST
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    Close();
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  bool Fill() {
    char b[4096];
    const ssize_t n = recv(fd_, b, sizeof b, 0);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  std::optional<std::string> Line() {
    for (;;) {
      const size_t p = buf_.find("\r\n");
      if (p != std::string::npos) {
        std::string line = buf_.substr(0, p);
        buf_.erase(0, p + 2);
        return line;
      }
      if (!Fill()) return std::nullopt;
    }
  }
  bool Take(size_t n, std::string* out) {
    while (buf_.size() < n) {
      if (!Fill()) return false;
    }
    out->append(buf_, 0, n);
    buf_.erase(0, n);
    return true;
  }
  int fd_;
  bool connected_ = false;
  std::string buf_;
};

inline std::string Get(const std::string& target, const std::string& headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: t\r\n" + headers + "\r\n";
}
inline std::string Post(const std::string& target, const std::string& body, const std::string& headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         headers + "\r\n" + body;
}

// A hang is a failure, not a stuck test run.
template <class T>
void WaitOrDie(std::future<T>& f, const char* what) {
  if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: timed out waiting for %s\n", what);
    std::_Exit(1);
  }
}

}  // namespace beacon::test

#endif  // BEACON_TESTS_SERVER_HTTP_HTTP_TEST_CLIENT_H_
