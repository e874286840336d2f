// ProbeAccept: a listener that reads and answers (or closes) is accepting;
// one that never calls accept() (gRPC 1.51's dead accept loop: connections
// complete into the kernel's backlog and nobody reads them) is not, and
// neither is a port nobody listens on.
#include "server/grpc/accept_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "server/grpc/grpc_front_end.h"

namespace beacon {
namespace {

using namespace std::chrono_literals;

// A listening socket on an ephemeral loopback port; closed on destruction.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd, 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd); }
};

TEST(AcceptProbeTest, AListenerThatNeverAcceptsIsUnanswered) {
  Listener l;  // listen() only: the kernel completes the handshake, nobody reads
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ProbeAccept("127.0.0.1", l.port, 300ms), AcceptProbe::kUnanswered);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 250ms) << "gave up before the deadline";
  EXPECT_LT(took, 5s) << "blocked past the deadline";
}

TEST(AcceptProbeTest, AListenerThatReadsAndAnswersOrClosesAccepts) {
  for (const bool answer : {true, false}) {
    Listener l;
    std::thread server([&] {
      const int c = accept(l.fd, nullptr, nullptr);
      ASSERT_GE(c, 0);
      char buf[64];
      EXPECT_GT(recv(c, buf, sizeof(buf), 0), 0) << "the probe sent nothing";
      if (answer) {
        EXPECT_EQ(send(c, "\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9, MSG_NOSIGNAL), 9);
      }
      close(c);  // without answering: a TLS listener refusing a non-ClientHello
    });
    EXPECT_EQ(ProbeAccept("127.0.0.1", l.port, 5s), AcceptProbe::kAccepted) << "answer " << answer;
    server.join();
  }
}

TEST(AcceptProbeTest, NobodyListeningIsUnansweredAtOnce) {
  int port;
  {
    Listener l;
    port = l.port;
  }  // closed: connect is refused
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ProbeAccept("127.0.0.1", port, 5s), AcceptProbe::kUnanswered);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(ProbeAccept("not a host name", port, 1s), AcceptProbe::kUnanswered);
}

TEST(AcceptProbeTest, AGrpcListenerAccepts) {
  GrpcFrontEndOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.reflection = false;
  auto fe = GrpcFrontEnd::Start(o, [] { return std::vector<std::unique_ptr<grpc::Service>>{}; });
  ASSERT_TRUE(fe.ok()) << fe.status();
  EXPECT_EQ(ProbeAccept("127.0.0.1", (*fe)->port(), 5s), AcceptProbe::kAccepted);
  EXPECT_EQ(ProbeAccept("[127.0.0.1]", (*fe)->port(), 5s), AcceptProbe::kAccepted) << "brackets";
}

}  // namespace
}  // namespace beacon
