// libFuzzer target for the gRPC request conversion (server/grpc/grpc_convert.h)
// up to the prepared request: the bytes of a beacon.v1 message as a client
// sends them, parsed by protobuf, converted by FromProto and checked by
// PrepareRequest (Generate) or TokenizeInput (Tokenize), exactly as the
// service runs them. Inputs protobuf does not parse are skipped (gRPC refuses
// them before our code). Every parsed input must end in a prepared request or
// a Status naming what is wrong.
//
// The tokenizer and chat template are real (DeepSeek-R1-Distill-Qwen-7B's,
// tests/fixtures/tokenizers), with its reasoning parser. The first byte picks
// the message: bit 0 set, a TokenizeRequest; else a GenerateRequest.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/grpc_corpus.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "engine/reasoning.h"
#include "engine/serving/serve_request.h"
#include "kv/kv_policy.h"
#include "model/tokenizer_loader.h"
#include "proto/beacon/v1/beacon.pb.h"
#include "server/grpc/grpc_convert.h"

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
    f.limits.context_length = 4096;
    f.limits.default_max_tokens = 64;
    f.limits.kv_default = beacon::KvPolicyOptions::DefaultsFor(beacon::KvPolicyKind::kBeacon);
    f.limits.kv_default.budget = 256;
    f.limits.kv_limits.min_budget = 32;
    f.limits.kv_limits.max_budget = 2048;
    if (auto r = beacon::ResolveReasoningParser("auto", *f.tokenizer); r.ok()) f.limits.reasoning = *r;
    return f;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Fixture& f = Fix();
  const void* body = data + 1;
  const int n = static_cast<int>(size - 1);
  if ((data[0] & 1) != 0) {
    beacon::v1::TokenizeRequest q;
    if (!q.ParseFromArray(body, n)) return 0;
    auto ids = beacon::TokenizeInput(beacon::FromProto(q), *f.tokenizer, f.limits);
    if (ids.ok()) {
      for (int32_t id : *ids) {
        if (id < 0 || id >= f.tokenizer->vocab_size()) std::abort();
      }
    }
    return 0;
  }
  beacon::v1::GenerateRequest q;
  if (!q.ParseFromArray(body, n)) return 0;
  auto prepared = beacon::PrepareRequest(beacon::FromProto(q), *f.tokenizer, f.limits);
  if (prepared.ok()) {
    for (int32_t id : prepared->prompt) {
      if (id < 0 || id >= f.tokenizer->vocab_size()) std::abort();
    }
    if (prepared->prompt.empty() || static_cast<int32_t>(prepared->prompt.size()) >= f.limits.context_length) {
      std::abort();
    }
  }
  return 0;
}
