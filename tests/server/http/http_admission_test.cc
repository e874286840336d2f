// ConnectionLimits (http_admission.h): each budget (the cap, the probe
// reserve, the per-client cap) counted and given back exactly once.
#include "server/http/http_admission.h"

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
    AdmissionTicket a3 = limits.Admit("a");
    EXPECT_EQ(a3.slot(), Slot::kRejected);
    EXPECT_THAT(a3.refusal(), HasSubstr("max_connections_per_client is 2"));
  }  // a rejected ticket gives nothing back
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

}  // namespace
}  // namespace beacon
