#include "server/grpc/accept_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

// The HTTP/2 connection preface (RFC 9113 3.4) and an empty SETTINGS frame.
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
constexpr size_t kPrefaceBytes = sizeof(kPreface) - 1;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Milliseconds left until `end`, at least 0.
int Left(Clock::time_point end) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on fd until `end`; false on the deadline.
bool Wait(int fd, short events, Clock::time_point end) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, Left(end));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // let the next call report the error
  }
}

}  // namespace

AcceptProbe ProbeAccept(const std::string& host, int port, std::chrono::milliseconds timeout) {
  const Clock::time_point end = Clock::now() + timeout;
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    return AcceptProbe::kUnanswered;
  }
  const Fd fd(socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    freeaddrinfo(found);
    return AcceptProbe::kNoSocket;
  }
  const int rc = connect(fd.get(), found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && errno != EINPROGRESS) return AcceptProbe::kUnanswered;  // refused: nobody listens
  if (!Wait(fd.get(), POLLOUT, end)) return AcceptProbe::kUnanswered;
  int error = 0;
  socklen_t len = sizeof(error);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) return AcceptProbe::kUnanswered;
  if (send(fd.get(), kPreface, kPrefaceBytes, MSG_NOSIGNAL) != static_cast<ssize_t>(kPrefaceBytes)) {
    return AcceptProbe::kUnanswered;  // a fresh socket's buffer takes 33 bytes; anything else is a reset
  }
  while (Wait(fd.get(), POLLIN, end)) {
    char buf[64];
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n >= 0) return AcceptProbe::kAccepted;  // bytes, or an orderly close
    if (errno == ECONNRESET) return AcceptProbe::kAccepted;
    if (errno != EAGAIN && errno != EINTR) return AcceptProbe::kUnanswered;
  }
  return AcceptProbe::kUnanswered;
}

}  // namespace beacon
