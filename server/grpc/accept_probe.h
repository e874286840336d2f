// Whether a listener accepts connections, judged from outside gRPC's client.
//
// Why not the gRPC channel's own state: the self-check's client lives in the
// server's process and shares gRPC 1.51's executor threads with it. Under a
// flood of reset streams (HTTP/2 rapid reset) one of those threads works off
// the attacking connection's backlog for seconds, and the client's connect
// and SETTINGS closures can queue behind it, so its channel stays CONNECTING
// although the listener accepted the connection and sent its SETTINGS within
// a millisecond (measured: tests/server/test_grpc_rapid_reset.py). A plain
// socket shares nothing with gRPC.
//
// The probe connects, writes the HTTP/2 client preface and an empty SETTINGS
// frame, and waits for any reply: the server's SETTINGS (a plaintext
// listener), or the connection closed or reset (a TLS listener refusing
// bytes that are not a ClientHello). Either proves that the server accepted
// the connection and read from it. A listener whose accept loop died (gRPC
// 1.51 after EMFILE) leaves the connection in the kernel's backlog, unread
// and unanswered, until the deadline.
#ifndef BEACON_SERVER_GRPC_ACCEPT_PROBE_H_
#define BEACON_SERVER_GRPC_ACCEPT_PROBE_H_

#include <chrono>
#include <string>

namespace beacon {

enum class AcceptProbe {
  kAccepted,    // the server read the probe and answered (or closed it)
  kUnanswered,  // connected (or not), nothing came back before the deadline
  kNoSocket,    // this process could not open a socket (e.g. out of descriptors)
};

// `host` is a numeric IPv4 or IPv6 address (brackets allowed) or a name;
// blocks for at most `timeout`.
AcceptProbe ProbeAccept(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace beacon

#endif  // BEACON_SERVER_GRPC_ACCEPT_PROBE_H_
