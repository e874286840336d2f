// Internal to the HTTP server (http_server.h, "Connections" and "Probes"):
// which connections are served, counted per budget and per peer address.
// Not for other modules.
#ifndef BEACON_SERVER_HTTP_HTTP_ADMISSION_H_
#define BEACON_SERVER_HTTP_HTTP_ADMISSION_H_

#include <string>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "util/mutex.h"

namespace beacon::http_internal {

// The budget a connection holds.
enum class Slot {
  kRejected,  // over a limit: answered 503 and closed; counts against no one
  kNormal,    // one of max_connections
  kReserve,   // one of probe_connections: one probe request, then closed
};

class ConnectionLimits;

// A connection's admission: what it holds, given back exactly once, when the
// ticket is destroyed (the connection owns its ticket, so when the
// connection dies). Move-only; a moved-from ticket holds nothing.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { Release(); }

  Slot slot() const { return slot_; }
  // For kRejected, and for a non-probe request on kReserve: the 503's
  // message, naming the limit.
  const std::string& refusal() const { return refusal_; }

 private:
  friend class ConnectionLimits;
  void Release();

  ConnectionLimits* limits_ = nullptr;  // null: holds nothing
  Slot slot_ = Slot::kRejected;
  bool over_cap_ = false;  // a reserve slot taken by a client over its cap
  std::string client_;
  std::string refusal_;
};

// Thread-safe; must outlive every ticket it issues.
class ConnectionLimits {
 public:
  // max_per_client 0: no per-client limit.
  ConnectionLimits(int max_connections, int max_per_client, int probe_connections)
      : max_connections_(max_connections), max_per_client_(max_per_client), probe_connections_(probe_connections) {}

  // Admits a connection from `client` (a peer address; empty when unknown,
  // then not counted per client). A client already holding max_per_client
  // connections gets a probe-reserve slot (its probes are answered, nothing
  // else: a kubelet often probes from its clients' address), while clients
  // over their caps hold less than a quarter of the reserve (at least one
  // slot); else it is rejected. Any other: a
  // max_connections slot; else a probe-reserve slot; else rejected.
  AdmissionTicket Admit(std::string client) ABSL_LOCKS_EXCLUDED(mu_);

  // Connections holding `slot` (kNormal or kReserve) now.
  int open(Slot slot) const ABSL_LOCKS_EXCLUDED(mu_);
  // Connections `client` holds now.
  int held_by(const std::string& client) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class AdmissionTicket;
  void Release(Slot slot, bool over_cap, const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);

  const int max_connections_;
  const int max_per_client_;
  const int probe_connections_;
  mutable Mutex mu_;
  int normal_ ABSL_GUARDED_BY(mu_) = 0;
  int reserve_ ABSL_GUARDED_BY(mu_) = 0;
  int over_cap_reserve_ ABSL_GUARDED_BY(mu_) = 0;  // of reserve_, taken by clients over their caps
  std::unordered_map<std::string, int> per_client_ ABSL_GUARDED_BY(mu_);  // only addresses holding some
};

}  // namespace beacon::http_internal

#endif  // BEACON_SERVER_HTTP_HTTP_ADMISSION_H_
