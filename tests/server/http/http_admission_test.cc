// ConnectionLimits (http_admission.h): each budget (the cap, the probe
// reserve, the per-client cap) counted and given back exactly once.
#include "server/http/http_admission.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

TEST(ConnectionLimitsTest, CountsEachBudgetAndClientAndGivesBackOnce) {
  using http_internal::AdmissionTicket;
  using http_internal::ConnectionLimits;
  using http_internal::Slot;
  ConnectionLimits limits(/*max_connections=*/2, /*max_per_client=*/2, /*probe_connections=*/1);
  AdmissionTicket a1 = limits.Admit("a"), a2 = limits.Admit("a");
  EXPECT_EQ(a1.slot(), Slot::kNormal);
  EXPECT_EQ(a2.slot(), Slot::kNormal);
  {
    // Over its cap, a client may still take the probe reserve (its probes
    // are answered; anything else gets this message)...
    AdmissionTicket a3 = limits.Admit("a");
    EXPECT_EQ(a3.slot(), Slot::kReserve);
    EXPECT_THAT(a3.refusal(), HasSubstr("max_connections_per_client is 2"));
    EXPECT_EQ(limits.held_by("a"), 3);
    // ...and with its share of the reserve (a quarter, at least one) taken
    // it is rejected.
    AdmissionTicket a4 = limits.Admit("a");
    EXPECT_EQ(a4.slot(), Slot::kRejected);
    EXPECT_THAT(a4.refusal(), HasSubstr("max_connections_per_client is 2"));
  }  // a3 gives its reserve slot back; a rejected ticket gives nothing back
  EXPECT_EQ(limits.open(Slot::kReserve), 0);
  EXPECT_EQ(limits.held_by("a"), 2);
  AdmissionTicket b1 = limits.Admit("b");
  EXPECT_EQ(b1.slot(), Slot::kReserve);
  AdmissionTicket b2 = limits.Admit("b");
  EXPECT_EQ(b2.slot(), Slot::kRejected);
  EXPECT_EQ(b2.refusal(), "too many connections");
  EXPECT_EQ(limits.open(Slot::kNormal), 2);
  EXPECT_EQ(limits.open(Slot::kReserve), 1);
  EXPECT_EQ(limits.held_by("a"), 2);
  EXPECT_EQ(limits.held_by("b"), 1);
  {
    AdmissionTicket moved = std::move(a1);
    a1 = AdmissionTicket();  // the moved-from ticket holds nothing to give back
    EXPECT_EQ(limits.open(Slot::kNormal), 2);
  }
  EXPECT_EQ(limits.open(Slot::kNormal), 1);
  EXPECT_EQ(limits.held_by("a"), 1);
  b1 = AdmissionTicket();
  EXPECT_EQ(limits.open(Slot::kReserve), 0);
  EXPECT_EQ(limits.held_by("b"), 0);
  AdmissionTicket unknown = limits.Admit("");  // peer address unknown: not counted per client
  EXPECT_EQ(unknown.slot(), Slot::kNormal);
  EXPECT_EQ(limits.held_by(""), 0);
}

TEST(ConnectionLimitsTest, ClientsOverTheirCapsTakeAQuarterOfTheReserveAtMost) {
  using http_internal::AdmissionTicket;
  using http_internal::ConnectionLimits;
  using http_internal::Slot;
  ConnectionLimits limits(/*max_connections=*/4, /*max_per_client=*/1, /*probe_connections=*/8);
  std::vector<AdmissionTicket> held;
  for (const char* c : {"a", "b", "c"}) held.push_back(limits.Admit(c));
  int reserve = 0;
  for (const char* c : {"a", "b", "c", "a", "b"}) {  // each over its cap
    AdmissionTicket t = limits.Admit(c);
    reserve += t.slot() == Slot::kReserve;
    if (t.slot() == Slot::kReserve) held.push_back(std::move(t));
  }
  EXPECT_EQ(reserve, 2);  // 8 / 4
  EXPECT_EQ(limits.open(Slot::kReserve), 2);
  // The rest of the reserve stays for everyone once max_connections is full.
  held.push_back(limits.Admit("d"));
  EXPECT_EQ(held.back().slot(), Slot::kNormal);
  for (int i = 0; i < 6; ++i) {
    AdmissionTicket t = limits.Admit(absl::StrCat("e", i));
    EXPECT_EQ(t.slot(), Slot::kReserve) << i;
    held.push_back(std::move(t));
  }
  EXPECT_EQ(limits.Admit("f").slot(), Slot::kRejected);
  held.clear();
  EXPECT_EQ(limits.open(Slot::kReserve), 0);
  EXPECT_EQ(limits.open(Slot::kNormal), 0);
}

}  // namespace
}  // namespace beacon
