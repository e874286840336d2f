#include "server/http/http_admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace beacon::http_internal {

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    Release();
    limits_ = std::exchange(other.limits_, nullptr);
    slot_ = std::exchange(other.slot_, Slot::kRejected);
    over_cap_ = std::exchange(other.over_cap_, false);
    client_ = std::move(other.client_);
    refusal_ = std::move(other.refusal_);
  }
  return *this;
}

void AdmissionTicket::Release() {
  if (limits_ == nullptr) return;
  std::exchange(limits_, nullptr)->Release(slot_, over_cap_, client_);
}

AdmissionTicket ConnectionLimits::Admit(std::string client) {
  AdmissionTicket t;
  MutexLock lock(&mu_);
  auto held = per_client_.find(client);
  const bool over_client_cap = max_per_client_ > 0 && held != per_client_.end() && held->second >= max_per_client_;
  if (over_client_cap) {
    // Only the probe reserve: a kubelet probe often shares its address with
    // client traffic (SNAT), and a client over its cap must not get the
    // probe answered 503 while the replica is healthy. Anything but a probe
    // on this connection gets this message.
    t.refusal_ =
        absl::StrCat("too many connections from ", client, " (max_connections_per_client is ", max_per_client_, ")");
    // At most a quarter of the reserve (at least one slot), so that clients
    // over their caps never take the whole reserve from other addresses.
    if (reserve_ >= probe_connections_ || over_cap_reserve_ >= std::max(1, probe_connections_ / 4)) return t;
    t.slot_ = Slot::kReserve;
    t.over_cap_ = true;
    ++reserve_;
    ++over_cap_reserve_;
  } else if (normal_ < max_connections_) {
    t.slot_ = Slot::kNormal;
    ++normal_;
  } else if (reserve_ < probe_connections_) {
    t.slot_ = Slot::kReserve;
    ++reserve_;
    t.refusal_ = "too many connections";
  } else {
    t.refusal_ = "too many connections";
    return t;
  }
  if (!client.empty()) ++per_client_[client];
  t.limits_ = this;
  t.client_ = std::move(client);
  return t;
}

void ConnectionLimits::Release(Slot slot, bool over_cap, const std::string& client) {
  MutexLock lock(&mu_);
  --(slot == Slot::kNormal ? normal_ : reserve_);
  if (over_cap) --over_cap_reserve_;
  if (client.empty()) return;
  auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

int ConnectionLimits::open(Slot slot) const {
  MutexLock lock(&mu_);
  return slot == Slot::kNormal ? normal_ : slot == Slot::kReserve ? reserve_ : 0;
}

int ConnectionLimits::held_by(const std::string& client) const {
  MutexLock lock(&mu_);
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

}  // namespace beacon::http_internal
