// beacon-client: a command-line client of beacon-serve's gRPC API (beacon.v1).
//
//   beacon-client "Plan a 3-day trip to Kyoto."             # chat, streams the answer
//   beacon-client --server host:50051 --raw --prompt "def fib(n):" --max-tokens 64
//   beacon-client --output-format jsonl ...   # one JSON object per streamed message
//   beacon-client tokenize "some text"
//   beacon-client info
//
// The exit status is 0 on success, 2 for bad arguments or INVALID_ARGUMENT,
// 1 for any other error; errors print the gRPC status and message.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "proto/beacon/v1/beacon.grpc.pb.h"
#include "proto/beacon/v1/finish_reason_name.h"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
namespace {

int Fail(const std::string& what, int code = 1) {
  std::fprintf(stderr, "beacon-client: %s\n", what.c_str());
  return code;
}

int FailRpc(const grpc::Status& s) {
  return Fail(absl::StrCat("error ", s.error_code(), ": ", s.error_message()),
              s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 1);
}

void Authorize(const cli::Args& args, grpc::ClientContext* ctx) {
  if (!args.Str("api-key").empty()) ctx->AddMetadata("authorization", "Bearer " + args.Str("api-key"));
  if (args.Has("timeout-s")) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(*args.Double("timeout-s") * 1000)));
  }
}

int Generate(v1::BeaconService::Stub* stub, const cli::Args& args, const std::string& prompt) {
  v1::GenerateRequest req;
  if (args.Flag("raw")) {
    req.set_text(prompt);
  } else {
    if (!args.Str("system").empty()) {
      v1::ChatMessage* m = req.mutable_chat()->add_messages();
      m->set_role("system");
      m->set_content(args.Str("system"));
    }
    v1::ChatMessage* m = req.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(prompt);
    // KEY=VALUE: VALUE as JSON when it parses (true, 3, "x"), else a string.
    for (const std::string& kv : args.All("template-kwarg")) {
      const size_t eq = kv.find('=');
      const std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
      google::protobuf::Value& v = (*req.mutable_chat()->mutable_chat_template_kwargs())[key];
      const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (j.is_boolean()) {
        v.set_bool_value(j.get<bool>());
      } else if (j.is_number()) {
        v.set_number_value(j.get<double>());
      } else {
        v.set_string_value(j.is_string() ? j.get<std::string>() : value);
      }
    }
  }
  if (args.Has("max-reasoning-tokens")) {
    req.mutable_stopping()->set_max_reasoning_tokens(static_cast<int32_t>(*args.Int("max-reasoning-tokens")));
  }
  req.mutable_stopping()->set_max_tokens(static_cast<int32_t>(*args.Int("max-tokens")));
  req.mutable_stopping()->set_ignore_eos(args.Flag("ignore-eos"));
  for (const std::string& s : args.All("stop")) req.mutable_stopping()->add_stop(s);
  req.mutable_sampling()->set_temperature(static_cast<float>(*args.Double("temperature")));
  if (args.Has("top-p")) req.mutable_sampling()->set_top_p(static_cast<float>(*args.Double("top-p")));
  if (args.Has("seed")) req.mutable_sampling()->set_seed(static_cast<uint64_t>(*args.Int("seed")));
  if (args.Has("kv-policy")) req.mutable_kv()->set_policy(args.Str("kv-policy"));
  if (args.Has("kv-budget")) req.mutable_kv()->set_budget(static_cast<int32_t>(*args.Int("kv-budget")));
  if (args.Has("cache-salt")) req.set_cache_salt(args.Str("cache-salt"));

  grpc::ClientContext ctx;
  Authorize(args, &ctx);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub->Generate(&ctx, req);
  v1::GenerateResponse msg;
  const bool json = args.Str("output-format") == "jsonl";
  while (reader->Read(&msg)) {
    if (json) {
      nlohmann::json j = {{"request_id", msg.request_id()}, {"token_ids", msg.token_ids()}, {"text", msg.text()}};
      if (!msg.reasoning_text().empty()) j["reasoning_text"] = msg.reasoning_text();
      if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        j["finish_reason"] = v1::FinishReasonName(msg.finish_reason());
        j["prompt_tokens"] = msg.usage().prompt_tokens();
        j["completion_tokens"] = msg.usage().completion_tokens();
        j["reasoning_tokens"] = msg.usage().reasoning_tokens();
        j["time_to_first_token_s"] = msg.timings().time_to_first_token_seconds();
        j["total_s"] = msg.timings().total_seconds();
        j["kv"] = {{"policy", msg.kv().policy()},
                   {"peak_cached_tokens", msg.kv().peak_cached_tokens()},
                   {"evictions", msg.kv().evictions()},
                   {"preemptions", msg.kv().preemptions()}};
        if (!msg.error().empty()) j["error"] = msg.error();
      }
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      // The reasoning goes to stderr, so stdout holds the answer alone.
      std::fwrite(msg.reasoning_text().data(), 1, msg.reasoning_text().size(), stderr);
      std::fwrite(msg.text().data(), 1, msg.text().size(), stdout);
      if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        std::fprintf(stderr,
                     "\n[%d prompt + %d completion tokens (%d reasoning), TTFT %.0f ms, %.2f s, finish: %s, kv: %s "
                     "peak %d]\n",
                     msg.usage().prompt_tokens(), msg.usage().completion_tokens(), msg.usage().reasoning_tokens(),
                     msg.timings().time_to_first_token_seconds() * 1e3, msg.timings().total_seconds(),
                     v1::FinishReasonName(msg.finish_reason()).c_str(), msg.kv().policy().c_str(),
                     msg.kv().peak_cached_tokens());
      }
    }
    std::fflush(stdout);
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return FailRpc(s);
  if (!json) std::printf("\n");
  return 0;
}

int Main(int argc, char** argv) {
  cli::Args args;
  args.Declare("server", false, "127.0.0.1:50051", "beacon-serve's gRPC address");
  args.Declare("api-key", false, "", "API key (sent as 'authorization: Bearer KEY')");
  args.Declare("tls-ca", false, "", "PEM CA certificate: connect over TLS");
  args.Declare("prompt", false, "", "prompt (or the first positional argument)");
  args.Declare("system", false, "", "system message (chat)");
  args.Declare("raw", true, "false", "send the prompt as raw text, without the chat template");
  args.Declare("max-tokens", false, "256", "tokens to generate at most");
  args.Declare("temperature", false, "0", "0 = greedy");
  args.Declare("top-p", false, "", "nucleus sampling mass");
  args.Declare("seed", false, "", "sampling seed");
  args.Declare("ignore-eos", true, "false", "keep generating past end-of-sequence");
  args.Declare("stop", false, "", "stop string (repeatable)");
  args.Declare("max-reasoning-tokens", false, "", "close the model's think block after this many tokens");
  args.Declare("template-kwarg", false, "",
               "KEY=VALUE chat template variable (repeatable), e.g. enable_thinking=false for Qwen3");
  args.Declare("kv-policy", false, "", "KV policy of this request (default: the server's)");
  args.Declare("kv-budget", false, "", "KV budget of this request");
  args.Declare("cache-salt", false, "", "prefix-cache partition of this request (vLLM's cache_salt)");
  args.Declare("timeout-s", false, "", "gRPC deadline in seconds");
  args.Declare("output-format", false, "text",
               "text (the answer on stdout, the figures on stderr) or jsonl (one JSON object per streamed message)");
  args.Refuse("json",
              "beacon-client --json was renamed --output-format jsonl (--json takes a path in the other tools)");
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) return Fail(std::string(s.message()), 2);
  if (args.help()) {
    const std::string& first = args.positional().empty() ? "" : args.positional()[0];
    const std::string synopsis =
        first == "tokenize" ? "usage: beacon-client tokenize TEXT [options]\nprints the ids and pieces as JSON"
        : first == "info"   ? "usage: beacon-client info [options]\nprints the served model's ModelInfo"
        : first == "generate"
            ? "usage: beacon-client [generate] PROMPT [options]\nstreams the answer to a chat (or --raw) prompt"
            : cli::CommandsHelp("beacon-client", {{"generate", "stream the answer to PROMPT (the default command)"},
                                                  {"tokenize", "the ids and pieces of TEXT, as JSON"},
                                                  {"info", "the served model's ModelInfo"}}) +
                  "\nEvery option is also read from BEACON_CLIENT_<OPTION> (e.g. BEACON_CLIENT_SERVER).";
    std::printf("%s", args.Help(synopsis).c_str());
    return 0;
  }
  if (absl::Status s = args.LoadEnvironment("BEACON_CLIENT_"); !s.ok()) return Fail(std::string(s.message()), 2);
  if (const std::string f = args.Str("output-format"); f != "text" && f != "jsonl") {
    return Fail("--output-format must be text or jsonl, got '" + f + "'", 2);
  }
  for (const char* f : {"max-tokens", "kv-budget", "seed", "max-reasoning-tokens"}) {
    if (args.Has(f) && !args.Int(f).ok()) return Fail(std::string(args.Int(f).status().message()), 2);
  }
  for (const char* f : {"temperature", "top-p", "timeout-s"}) {
    if (args.Has(f) && !args.Double(f).ok()) return Fail(std::string(args.Double(f).status().message()), 2);
  }
  std::vector<std::string> pos = args.positional();
  std::string cmd = "generate";
  if (!pos.empty() && (pos[0] == "generate" || pos[0] == "tokenize" || pos[0] == "info")) {
    cmd = pos[0];
    pos.erase(pos.begin());
  }
  std::string prompt = args.Str("prompt");
  if (!pos.empty()) {
    if (!prompt.empty() || pos.size() > 1) return Fail("give one prompt (quote it)", 2);
    prompt = pos[0];
  }

  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (args.Has("tls-ca")) {
    std::ifstream in(args.Str("tls-ca"));
    if (!in) return Fail("--tls-ca: cannot read " + args.Str("tls-ca"), 2);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    creds = grpc::SslCredentials(ssl);
  }
  auto stub = v1::BeaconService::NewStub(grpc::CreateChannel(args.Str("server"), creds));

  if (cmd == "info") {
    grpc::ClientContext ctx;
    Authorize(args, &ctx);
    v1::ModelInfo info;
    grpc::Status s = stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (!s.ok()) return FailRpc(s);
    std::printf("%s", info.DebugString().c_str());
    return 0;
  }
  if (prompt.empty()) return Fail("the prompt is empty: pass it as an argument or with --prompt", 2);
  if (cmd == "tokenize") {
    grpc::ClientContext ctx;
    Authorize(args, &ctx);
    v1::TokenizeRequest req;
    req.set_text(prompt);
    v1::TokenizeResponse resp;
    grpc::Status s = stub->Tokenize(&ctx, req, &resp);
    if (!s.ok()) return FailRpc(s);
    nlohmann::json j = {{"ids", resp.ids()}, {"pieces", resp.pieces()}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  return Generate(stub.get(), args, prompt);
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-client", &beacon::Main, argc, argv); }
