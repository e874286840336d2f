// A RequestSink that keeps what the engine thread hands it (the streamed
// token ids, the final record, a rejection), for the serving tests that run
// the engine and the scheduler on the test's own thread.
#ifndef BEACON_TESTS_ENGINE_SERVING_COLLECT_SINK_H_
#define BEACON_TESTS_ENGINE_SERVING_COLLECT_SINK_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/serving/request_sink.h"

namespace beacon::testing {

class CollectSink : public RequestSink {
 public:
  void OnTokens(std::span<const int32_t> ids, std::string_view, TextPart, std::span<const PositionLogprobs>) override {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  void OnFinish(const StreamFinal& f) override {
    final = f;
    ++finishes;
  }
  void OnRejected(const absl::Status& s) override { rejected = s; }

  std::vector<int32_t> tokens;  // every streamed id, in order
  StreamFinal final;
  int32_t finishes = 0;  // OnFinish calls (the contract: exactly one)
  absl::Status rejected;
};

}  // namespace beacon::testing

#endif  // BEACON_TESTS_ENGINE_SERVING_COLLECT_SINK_H_
