// Why a sequence stopped producing tokens: one enum from the generation to
// the client's final record.
//
// A Generation ends itself for the natural reasons (kLength, kEos, kStop,
// kStopSequence); a request can also be ended from outside its generation
// (kTimeLimit, kCancelled, kError), which the server reads from the
// scheduler's terminal RequestState (server/generation_engine.cc). The
// distinctions carry meaning to clients: kEos and kStop end on a token that
// is not streamed (StreamFinal::stop_token_id), kStopSequence on a string
// that is held back (StreamFinal::matched_stop). Each wire format maps from
// this enum in one function: beacon.v1.FinishReason in server/grpc_convert.cc,
// OpenAI's finish_reason in server/openai_routes.cc.
#ifndef BEACON_ENGINE_FINISH_REASON_H_
#define BEACON_ENGINE_FINISH_REASON_H_

#include <string_view>

namespace beacon {

enum class FinishReason {
  kNone,          // still running
  kLength,        // max_tokens reached, or the model's context is full
  kEos,           // an end-of-generation token of the model
  kStop,          // one of the request's stop token ids
  kStopSequence,  // one of the request's stop strings
  kTimeLimit,     // the request's deadline passed (time_limit_ms, the gRPC deadline)
  kCancelled,     // the client went away, or the server cancelled it (drain)
  kError,         // the engine failed the request
};

// "none", "length", "eos", "stop", "stop_sequence", "time_limit",
// "cancelled", "error": the metrics' finished_reason label and the CLI's.
constexpr std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStop: return "stop";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kTimeLimit: return "time_limit";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

}  // namespace beacon

#endif  // BEACON_ENGINE_FINISH_REASON_H_
