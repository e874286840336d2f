// libFuzzer target for the OpenAI request reader, up to the prepared
// request: the body of POST /v1/chat/completions or /v1/completions, as a
// client sends it, through ParseOpenAiRequest (bounded JSON, every field's
// type and range) and PrepareRequest (the chat template, tokenisation, the
// server's limits), exactly as the HTTP route runs them. Every input must end
// in a prepared request or a Status naming what is wrong.
//
// The tokenizer and chat template are real: DeepSeek-R1-Distill-Qwen-7B's
// (tests/fixtures/tokenizers), with its reasoning parser on, so chat
// requests render through a real template and reach the reasoning split.
// The first byte picks the endpoint (bit 0: chat; with bit 1, the tokenizer
// endpoints instead: /tokenize, or /detokenize with bit 0; issue 46); the
// rest is the body. A tokenize answer stays within the token limit, and a
// detokenize answer within the byte limit.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/openai_corpus.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/serving/serve_request.h"
#include "server/openai/openai_request.h"
#include "server/openai/tokenize_body.h"
#include "tests/fuzz/fuzz_serve_limits.h"

namespace {

void FuzzTokenizeBodies(bool detokenize, const std::string& body) {
  beacon::TokenizeOptions options{"default", beacon::fuzz::FuzzServeLimits(), {}};
  const beacon::Tokenizer& tok = beacon::fuzz::R1Tokenizer();
  if (!detokenize) {
    absl::StatusOr<nlohmann::json> out = beacon::TokenizeBody(body, tok, options);
    if (out.ok() && (*out)["tokens"].size() > static_cast<size_t>(beacon::TokenizeTokenLimit(options.limits))) {
      std::abort();  // more ids than the limit allows
    }
    return;
  }
  absl::StatusOr<nlohmann::json> out = beacon::DetokenizeBody(body, tok, options);
  if (out.ok() && (*out)["prompt"].get_ref<const std::string&>().size() >
                      static_cast<size_t>(options.limits.max_detokenize_bytes)) {
    std::abort();  // more text than the limit allows
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if ((data[0] & 2) != 0) {
    FuzzTokenizeBodies((data[0] & 1) != 0, std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    return 0;
  }
  const auto endpoint =
      (data[0] & 1) != 0 ? beacon::OpenAiEndpoint::kChatCompletions : beacon::OpenAiEndpoint::kCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<beacon::OpenAiRequest> parsed = beacon::ParseOpenAiRequest(endpoint, body, "default");
  if (!parsed.ok()) return 0;
  absl::StatusOr<beacon::PreparedRequest> prepared =
      beacon::PrepareRequest(parsed->serve, beacon::fuzz::R1Tokenizer(), beacon::fuzz::FuzzServeLimits());
  if (prepared.ok()) beacon::fuzz::CheckPrepared(*prepared);
  return 0;
}
