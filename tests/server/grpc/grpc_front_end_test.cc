// GrpcFrontEnd: the self-check through the real listener, readiness, and the
// rebuild after gRPC 1.51's accept loop dies on EMFILE, reproduced in-process
// by lowering this process's descriptor limit and filling it with
// connections to the port.
#include "server/grpc/grpc_front_end.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace beacon {
namespace {

using namespace std::chrono_literals;

GrpcFrontEnd::ServiceFactory NoServices() {
  return [] { return std::vector<std::unique_ptr<grpc::Service>>{}; };  // health only
}

GrpcFrontEndOptions Loopback() {
  GrpcFrontEndOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.check_interval = 100ms;
  o.check_timeout = 500ms;
  o.failures_to_restart = 2;
  o.reflection = false;
  return o;
}

int Connect(int port) {  // -1 once descriptors run out
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

template <class Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

TEST(GrpcFrontEndTest, ServesAndChecksItself) {
  auto fe = GrpcFrontEnd::Start(Loopback(), NoServices());
  ASSERT_TRUE(fe.ok()) << fe.status();
  EXPECT_GT((*fe)->port(), 0);
  EXPECT_TRUE((*fe)->serving());
  // NOT_SERVING (a drain) is an answer: the listener still counts as alive,
  // after self-checks that did run (counted: a watchdog that never checks
  // fails this wait rather than passing by sleeping).
  (*fe)->SetServingStatus(false);
  const int checks = (*fe)->checks();
  ASSERT_TRUE(WaitFor([&] { return (*fe)->checks() >= checks + 2; }, 10s)) << "no self-check ran";
  EXPECT_TRUE((*fe)->serving());
  EXPECT_EQ((*fe)->restarts(), 0);
  EXPECT_EQ((*fe)->busy_checks(), 0);
  (*fe)->Shutdown(std::chrono::system_clock::now());
  EXPECT_FALSE((*fe)->serving());
}

// A failed check counts only if it ended in time: late, the process was
// starved and the listener is not to blame (issue 32's eval lost 16 streams
// to a restart that starvation caused).
TEST(GrpcFrontEndTest, ALateFailedCheckIsInconclusive) {
  using std::chrono::milliseconds;
  const milliseconds timeout(2000);
  EXPECT_EQ(JudgeSelfCheck(true, true, milliseconds(10), timeout), SelfCheckVerdict::kServing);
  EXPECT_EQ(JudgeSelfCheck(true, true, milliseconds(9000), timeout), SelfCheckVerdict::kServing)
      << "an answer is an answer";
  EXPECT_EQ(JudgeSelfCheck(false, false, milliseconds(5), timeout), SelfCheckVerdict::kFailed) << "refused at once";
  EXPECT_EQ(JudgeSelfCheck(false, false, milliseconds(2010), timeout), SelfCheckVerdict::kFailed)
      << "timed out on time";
  EXPECT_EQ(JudgeSelfCheck(false, false, milliseconds(4000), timeout), SelfCheckVerdict::kFailed);
  EXPECT_EQ(JudgeSelfCheck(false, false, milliseconds(4001), timeout), SelfCheckVerdict::kInconclusive);
  EXPECT_EQ(JudgeSelfCheck(false, false, milliseconds(30000), timeout), SelfCheckVerdict::kInconclusive);
  EXPECT_EQ(JudgeSelfCheck(false, true, milliseconds(30000), timeout), SelfCheckVerdict::kInconclusive)
      << "late says nothing, connected or not";
}

// A check whose connection the server accepted (its SETTINGS arrived) but
// whose call waited past the deadline found a listener working off a backlog
// (gRPC 1.51 under a rapid-reset flood): a rebuild would cancel every stream
// the old server runs and the flood would follow, so it never counts.
TEST(GrpcFrontEndTest, AnAcceptedButUnansweredCheckIsBusyNotFailed) {
  using std::chrono::milliseconds;
  const milliseconds timeout(2000);
  EXPECT_EQ(JudgeSelfCheck(false, true, milliseconds(2010), timeout), SelfCheckVerdict::kBusy);
  EXPECT_EQ(JudgeSelfCheck(false, true, milliseconds(5), timeout), SelfCheckVerdict::kBusy);
  EXPECT_EQ(JudgeSelfCheck(false, false, milliseconds(2010), timeout), SelfCheckVerdict::kFailed)
      << "no SETTINGS: the EMFILE listener";
}

TEST(GrpcFrontEndTest, BadOptionsNameTheField) {
  GrpcFrontEndOptions o = Loopback();
  o.failures_to_restart = 0;
  auto fe = GrpcFrontEnd::Start(o, NoServices());
  ASSERT_FALSE(fe.ok());
  EXPECT_NE(fe.status().message().find("failures_to_restart"), std::string::npos) << fe.status();
  o = Loopback();
  o.port = 70000;
  EXPECT_EQ(GrpcFrontEnd::Start(o, NoServices()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GrpcFrontEndTest, RebuildsTheListenerAfterDescriptorsRunOut) {
  auto fe = GrpcFrontEnd::Start(Loopback(), NoServices());
  ASSERT_TRUE(fe.ok()) << fe.status();
  const int port = (*fe)->port();

  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original), 0);
  rlimit low = original;
  low.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  // Fill the descriptor table, free one, and connect: our socket takes the
  // last descriptor, so gRPC's accept4() of the connection fails with EMFILE,
  // which ends gRPC 1.51's accept loop for good.
  std::vector<int> fillers;
  for (;;) {
    const int fd = dup(STDERR_FILENO);
    if (fd < 0) break;
    fillers.push_back(fd);
  }
  ASSERT_FALSE(fillers.empty());
  close(fillers.back());
  fillers.pop_back();
  std::vector<int> clients;
  if (const int fd = Connect(port); fd >= 0) clients.push_back(fd);
  // Descriptors are exhausted: the listener's self-check fails.
  EXPECT_TRUE(WaitFor([&] { return !(*fe)->serving(); }, 10s)) << "self-check still passes";
  for (int fd : clients) close(fd);
  for (int fd : fillers) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &original), 0);
  // Serves again through a rebuilt listener.
  EXPECT_TRUE(WaitFor([&] { return (*fe)->serving(); }, 10s)) << "listener not rebuilt";
  EXPECT_GE((*fe)->restarts(), 1);
  EXPECT_EQ((*fe)->port(), port);
  // The dead listener never sent SETTINGS to a check: no check of it was busy.
  EXPECT_EQ((*fe)->busy_checks(), 0);
}

}  // namespace
}  // namespace beacon
