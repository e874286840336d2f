// Every FinishReason in every API, from the one mapping of
// engine/finish_reason.h: our name (logs, CLIs, --metrics-prefix beacon),
// the gRPC enum (server/grpc/grpc_convert.h, derived from the name), and vLLM's
// word (OpenAI's finish_reason, --metrics-prefix vllm). A time limit is
// `length` to OpenAI and to vLLM-named metrics alike (issue 31: OpenAI said
// length while the metrics said abort).
#include "engine/finish_reason.h"

#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "proto/beacon/v1/beacon.pb.h"
#include "proto/beacon/v1/finish_reason_name.h"
#include "server/grpc/grpc_convert.h"
#include "server/ops/metric_names.h"

namespace beacon {
namespace {

struct Row {
  FinishReason reason;
  std::string_view name;   // FinishReasonName; the beacon metrics label
  v1::FinishReason proto;  // gRPC
  std::string_view vllm;   // OpenAI finish_reason; the vllm metrics label
};

// In enum order, one row per value.
constexpr Row kTable[] = {
    {FinishReason::kNone, "none", v1::FINISH_REASON_UNSPECIFIED, ""},
    {FinishReason::kLength, "length", v1::FINISH_REASON_LENGTH, "length"},
    {FinishReason::kEos, "eos", v1::FINISH_REASON_EOS, "stop"},
    {FinishReason::kStop, "stop", v1::FINISH_REASON_STOP, "stop"},
    {FinishReason::kStopSequence, "stop_sequence", v1::FINISH_REASON_STOP_SEQUENCE, "stop"},
    {FinishReason::kTimeLimit, "time_limit", v1::FINISH_REASON_TIME_LIMIT, "length"},
    {FinishReason::kCancelled, "cancelled", v1::FINISH_REASON_CANCELLED, "abort"},
    {FinishReason::kError, "error", v1::FINISH_REASON_ERROR, "abort"},
};

TEST(FinishReasonTest, TheTableHasEveryValueInOrder) {
  for (size_t i = 0; i < std::size(kTable); ++i) EXPECT_EQ(static_cast<size_t>(kTable[i].reason), i);
  // The enum ends at kError; a new value needs a row here (and a word in each API).
  EXPECT_EQ(static_cast<size_t>(FinishReason::kError) + 1, std::size(kTable));
  ASSERT_EQ(std::size(kFinalFinishReasons) + 1, std::size(kTable));
  for (size_t i = 0; i < std::size(kFinalFinishReasons); ++i) EXPECT_EQ(kFinalFinishReasons[i], kTable[i + 1].reason);
}

TEST(FinishReasonTest, EveryApiNamesEveryValue) {
  for (const Row& r : kTable) {
    SCOPED_TRACE(std::string(r.name));
    EXPECT_EQ(FinishReasonName(r.reason), r.name);
    EXPECT_EQ(VllmFinishReason(r.reason), r.vllm);
    EXPECT_EQ(ToProto(r.reason), r.proto);
    if (r.reason == FinishReason::kNone) continue;  // never in a final record
    // The wire's name is ours, word for word (what beacon-client prints).
    EXPECT_EQ(v1::FinishReasonName(ToProto(r.reason)), r.name);
    EXPECT_EQ(FinishedReasonLabel(r.reason, MetricsNaming::kBeacon), r.name);
    EXPECT_EQ(FinishedReasonLabel(r.reason, MetricsNaming::kVllm), r.vllm);
  }
}

TEST(FinishReasonTest, TimeLimitIsLengthWhereverVllmsWordsAreSpoken) {
  // OpenAI and the vLLM-named metrics agree, and ours keeps the distinction.
  EXPECT_EQ(VllmFinishReason(FinishReason::kTimeLimit), "length");
  EXPECT_EQ(FinishedReasonLabel(FinishReason::kTimeLimit, MetricsNaming::kVllm), "length");
  EXPECT_EQ(FinishedReasonLabel(FinishReason::kTimeLimit, MetricsNaming::kBeacon), "time_limit");
  EXPECT_EQ(ToProto(FinishReason::kTimeLimit), v1::FINISH_REASON_TIME_LIMIT);
}

TEST(FinishReasonTest, EveryWireValueComesFromOneReason) {
  const google::protobuf::EnumDescriptor* d = v1::FinishReason_descriptor();
  std::set<int> produced;
  for (const Row& r : kTable) EXPECT_TRUE(produced.insert(ToProto(r.reason)).second) << r.name;
  for (int i = 0; i < d->value_count(); ++i) EXPECT_TRUE(produced.count(d->value(i)->number())) << d->value(i)->name();
}

TEST(FinishReasonTest, VllmWordsAreVllmsOnly) {
  const std::set<std::string_view> vllm = {"stop", "length", "abort"};
  for (FinishReason f : kFinalFinishReasons) EXPECT_TRUE(vllm.count(VllmFinishReason(f))) << FinishReasonName(f);
  const std::vector<std::string> labels = FinishedReasonLabels(MetricsNaming::kVllm);
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()), (std::set<std::string>{"stop", "length", "abort"}));
  EXPECT_EQ(FinishedReasonLabels(MetricsNaming::kBeacon).size(), std::size(kFinalFinishReasons));
}

}  // namespace
}  // namespace beacon
