// Why a sequence stopped producing tokens: one enum from the generation to
// the client's final record, and the one place its names are decided.
//
// A Generation ends itself for the natural reasons (kLength, kEos, kStop,
// kStopSequence); a request can also be ended from outside its generation
// (kTimeLimit, kCancelled, kError), which the server reads from the
// scheduler's terminal RequestState (engine/serving/generation_engine.cc). The
// distinctions carry meaning to clients: kEos and kStop end on a token that
// is not streamed (StreamFinal::stop_token_id), kStopSequence on a string
// that is held back (StreamFinal::matched_stop).
//
// Every API names a reason through one of the two functions below, never
// through a switch of its own:
//   - FinishReasonName, ours, one word per value: the gRPC enum
//     (beacon.v1.FinishReason is FINISH_REASON_<name>, server/grpc/grpc_convert.cc
//     derives it from the name), the finished_reason label under
//     --metrics-prefix beacon (server/ops/metric_names.cc), logs and the CLIs;
//   - VllmFinishReason, vLLM's vocabulary, which vLLM itself reports both in
//     its OpenAI server and in its metrics: OpenAI's finish_reason
//     (server/openai/openai_completion.cc) and the finished_reason label under
//     --metrics-prefix vllm.
// tests/server/grpc/finish_reason_test.cc pins every value in every API.
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

// Every reason a final record can carry (all but kNone), in enum order.
inline constexpr FinishReason kFinalFinishReasons[] = {
    FinishReason::kLength,    FinishReason::kEos,       FinishReason::kStop,  FinishReason::kStopSequence,
    FinishReason::kTimeLimit, FinishReason::kCancelled, FinishReason::kError,
};

// "none", "length", "eos", "stop", "stop_sequence", "time_limit",
// "cancelled", "error".
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

// vLLM's finish reasons (its FinishReason: stop, length, abort); "" for
// kNone (not finished: OpenAI's null).
//   stop   = kEos, kStop, kStopSequence: the model or the request's stop
//            criteria ended the text;
//   length = kLength and kTimeLimit: a limit the client set (max_tokens,
//            time_limit_ms, the gRPC deadline) or the context cut the text
//            short. A time limit is a budget on the output like max_tokens:
//            the text is valid and truncated, which is what OpenAI's
//            "length" tells a client (raise the limit or continue); Hugging
//            Face generate's max_time, too, is a stopping criterion beside
//            max_length. vLLM's "abort" is a request taken away (client
//            gone, engine failure): counting deadlines the client chose as
//            aborts would raise an abort-rate alert on healthy traffic;
//   abort  = kCancelled and kError. OpenAI never sees kError as a
//            finish_reason: the HTTP API answers it with an error instead.
// The distinction stays in our names: time_limit in the gRPC enum and under
// --metrics-prefix beacon.
constexpr std::string_view VllmFinishReason(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "";
    case FinishReason::kEos:
    case FinishReason::kStop:
    case FinishReason::kStopSequence: return "stop";
    case FinishReason::kLength:
    case FinishReason::kTimeLimit: return "length";
    case FinishReason::kCancelled:
    case FinishReason::kError: return "abort";
  }
  return "abort";
}

}  // namespace beacon

#endif  // BEACON_ENGINE_FINISH_REASON_H_
