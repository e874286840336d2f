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
// The first byte picks the endpoint (bit 0: chat); the rest is the body.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/openai_corpus.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/reasoning.h"
#include "engine/serving/serve_request.h"
#include "kv/kv_policy.h"
#include "model/tokenizer_loader.h"
#include "server/openai/openai_request.h"

#ifndef BEACON_SOURCE_DIR
#error "BEACON_SOURCE_DIR must name the source tree (the tokenizer fixture is read from it)"
#endif

namespace {

struct Fixture {
  std::unique_ptr<beacon::Tokenizer> tokenizer;
  beacon::ServeLimits limits;
};

const Fixture& Fix() {
  static const Fixture f = [] {
    Fixture f;
    auto data = beacon::LoadTokenizerData(BEACON_SOURCE_DIR "/tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf");
    if (!data.ok()) {
      std::fprintf(stderr, "tokenizer fixture: %s\n", data.status().ToString().c_str());
      std::abort();
    }
    auto t = beacon::Tokenizer::Create(*std::move(data));
    if (!t.ok()) std::abort();
    f.tokenizer = *std::move(t);
    // A server's limits, small enough that a fuzzed request stays cheap.
    f.limits.context_length = 4096;
    f.limits.default_max_tokens = 64;
    f.limits.kv_default = beacon::KvPolicyOptions::DefaultsFor(beacon::KvPolicyKind::kBeacon);
    f.limits.kv_default.budget = 256;
    f.limits.kv_limits.min_budget = 32;
    f.limits.kv_limits.max_budget = 2048;
    auto reasoning = beacon::ResolveReasoningParser("auto", *f.tokenizer);
    if (reasoning.ok()) f.limits.reasoning = *reasoning;
    return f;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Fixture& f = Fix();
  const auto endpoint =
      (data[0] & 1) != 0 ? beacon::OpenAiEndpoint::kChatCompletions : beacon::OpenAiEndpoint::kCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<beacon::OpenAiRequest> parsed = beacon::ParseOpenAiRequest(endpoint, body, "default");
  if (!parsed.ok()) return 0;
  absl::StatusOr<beacon::PreparedRequest> prepared = beacon::PrepareRequest(parsed->serve, *f.tokenizer, f.limits);
  if (prepared.ok()) {
    // What the engine relies on: a prompt inside the vocabulary and the context.
    for (int32_t id : prepared->prompt) {
      if (id < 0 || id >= f.tokenizer->vocab_size()) std::abort();
    }
    if (prepared->prompt.empty() || static_cast<int32_t>(prepared->prompt.size()) >= f.limits.context_length) {
      std::abort();
    }
  }
  return 0;
}
