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
#include <cstdlib>

#include "engine/serving/serve_request.h"
#include "proto/beacon/v1/beacon.pb.h"
#include "server/grpc/grpc_convert.h"
#include "tests/fuzz/fuzz_serve_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const beacon::Tokenizer& tok = beacon::fuzz::R1Tokenizer();
  const void* body = data + 1;
  const int n = static_cast<int>(size - 1);
  if ((data[0] & 1) != 0) {
    beacon::v1::TokenizeRequest q;
    if (!q.ParseFromArray(body, n)) return 0;
    auto ids = beacon::TokenizeInput(beacon::FromProto(q), tok, beacon::fuzz::FuzzServeLimits());
    if (ids.ok()) {
      for (int32_t id : *ids) {
        if (id < 0 || id >= tok.vocab_size()) std::abort();
      }
    }
    return 0;
  }
  beacon::v1::GenerateRequest q;
  if (!q.ParseFromArray(body, n)) return 0;
  auto prepared = beacon::PrepareRequest(beacon::FromProto(q), tok, beacon::fuzz::FuzzServeLimits());
  if (prepared.ok()) beacon::fuzz::CheckPrepared(*prepared);
  return 0;
}
