// The OpenAI wire format without a network: request bodies per backend, the
// SSE reader's token counting and timing (with and without continuous usage),
// error events and HTTP statuses, and URL parsing.
#include "loadtest/openai_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loadtest/http_client.h"

namespace beacon::loadtest {
namespace {

using json = nlohmann::json;

RequestSpec TextSpec() {
  RequestSpec s;
  s.text = "Hello";
  s.max_tokens = 7;
  return s;
}

TEST(OpenAiBodyTest, CompletionsCarryIdsOrTextAndUsage) {
  RequestSpec ids;
  ids.tokens = {5, 6, 7};
  ids.max_tokens = 3;
  ids.ignore_eos = true;
  ids.kv = KvChoice{"beacon", 64, 1};
  absl::StatusOr<std::string> b = OpenAiBody(ids, Backend::kOpenAi, "m", false);
  ASSERT_TRUE(b.ok()) << b.status();
  json j = json::parse(*b);
  EXPECT_EQ(j["prompt"], json({5, 6, 7}));
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["max_tokens"], 3);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["kv_policy"], "beacon");
  EXPECT_EQ(j["kv_budget"], 64);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"], json({{"include_usage", true}}));
  EXPECT_FALSE(j.contains("seed"));  // greedy

  b = OpenAiBody(TextSpec(), Backend::kOpenAi, "m", true);
  ASSERT_TRUE(b.ok());
  j = json::parse(*b);
  EXPECT_EQ(j["prompt"], "Hello");
  EXPECT_EQ(j["stream_options"]["continuous_usage_stats"], true);
  EXPECT_FALSE(j.contains("kv_policy"));  // "default": the server's own
  EXPECT_FALSE(j.contains("ignore_eos"));
}

TEST(OpenAiBodyTest, ChatSendsMessagesAndRefusesTokenIds) {
  absl::StatusOr<std::string> b = OpenAiBody(TextSpec(), Backend::kOpenAiChat, "m", false);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(json::parse(*b)["messages"], json::parse(R"([{"role": "user", "content": "Hello"}])"));
  RequestSpec ids;
  ids.tokens = {1};
  EXPECT_EQ(OpenAiBody(ids, Backend::kOpenAiChat, "m", false).status().code(), absl::StatusCode::kInvalidArgument);
  RequestSpec chat;
  chat.chat = {{"system", "s"}, {"user", "u"}};
  EXPECT_EQ(OpenAiBody(chat, Backend::kOpenAi, "m", false).status().code(), absl::StatusCode::kInvalidArgument);
  b = OpenAiBody(chat, Backend::kOpenAiChat, "m", false);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(json::parse(*b)["messages"].size(), 2u);
}

TEST(SseReaderTest, CountsChunksAndTakesUsageAsTheTruth) {
  RequestResult base;
  base.index = 3;
  SseReader r(base);
  r.OnStatus(200);
  // Split across reads, with \r\n line ends and a comment line.
  EXPECT_EQ(r.OnBytes(": keep-alive\n\ndata: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n", 0.1), 0);
  EXPECT_EQ(r.OnBytes("\ndata: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n", 0.3), 1 + 1);
  EXPECT_EQ(r.OnBytes("data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n", 0.35), 0);
  EXPECT_EQ(r.OnBytes("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n"
                      "data: [DONE]\n\n",
                      0.4),
            0);
  RequestResult out = r.Finish(absl::OkStatus(), 0.5);
  EXPECT_TRUE(out.Ok());
  EXPECT_EQ(out.index, 3);
  EXPECT_DOUBLE_EQ(out.ttft_s, 0.3);  // both chunks completed in the read at 0.3
  EXPECT_EQ(out.finish_reason, "length");
  EXPECT_EQ(out.prompt_tokens, 4);
  EXPECT_EQ(out.output_tokens, 3);  // usage, not the 2 chunks (an unstreamed EOS counts)
  EXPECT_EQ(out.server_completion_tokens, 3);
  EXPECT_EQ(out.itl_s.size(), 1u);
  EXPECT_DOUBLE_EQ(out.e2e_s, 0.5);
}

TEST(SseReaderTest, ContinuousUsageSplitsAChunkIntoItsTokens) {
  SseReader r(RequestResult{});
  r.OnStatus(200);
  auto chunk = [](const char* delta, int tokens) {
    return "data: " +
           json({{"choices", {{{"delta", {{"content", delta}}}}}}, {"usage", {{"completion_tokens", tokens}}}}).dump() +
           "\n\n";
  };
  EXPECT_EQ(
      r.OnBytes("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}],\"usage\":{\"completion_tokens\":0}}\n\n",
                0.05),
      0);
  EXPECT_EQ(r.OnBytes(chunk("He", 2), 0.2), 2);  // the first chunk held 2 tokens
  EXPECT_EQ(r.OnBytes(chunk("llo", 5), 0.5), 3);
  r.OnBytes("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":5}}\n\n",
            0.6);
  RequestResult out = r.Finish(absl::OkStatus(), 0.7);  // no [DONE]: a finish_reason is enough
  EXPECT_TRUE(out.Ok());
  EXPECT_EQ(out.output_tokens, 5);
  ASSERT_EQ(out.itl_s.size(), 4u);  // one per token after the first
  EXPECT_DOUBLE_EQ(out.itl_s[0], 0.0);
  EXPECT_DOUBLE_EQ(out.itl_s[1], 0.1);
  EXPECT_DOUBLE_EQ(out.itl_s[3], 0.1);
}

TEST(SseReaderTest, ErrorsBecomeStatusCodes) {
  SseReader refused(RequestResult{});
  refused.OnStatus(429);
  refused.OnBytes("{\"error\": {\"message\": \"queue full\"}}", 0.01);
  RequestResult out = refused.Finish(absl::OkStatus(), 0.02);
  EXPECT_EQ(out.grpc_code, 8);  // RESOURCE_EXHAUSTED
  EXPECT_NE(out.error.find("HTTP 429"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("queue full"), std::string::npos) << out.error;

  SseReader mid(RequestResult{});
  mid.OnStatus(200);
  mid.OnBytes("data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n", 0.1);
  out = mid.Finish(absl::OkStatus(), 0.2);
  EXPECT_EQ(out.grpc_code, 13);
  EXPECT_EQ(out.error, "boom");
  EXPECT_FALSE(out.Ok());

  SseReader cut(RequestResult{});
  cut.OnStatus(200);
  cut.OnBytes("data: {\"choices\":[{\"text\":\"x\"}]}\n\n", 0.1);
  out = cut.Finish(absl::OkStatus(), 0.2);  // the connection closed before any finish
  EXPECT_EQ(out.grpc_code, 14);

  SseReader late(RequestResult{});
  late.OnStatus(200);
  out = late.Finish(absl::DeadlineExceededError("timed out"), 9);
  EXPECT_EQ(out.grpc_code, 4);
  EXPECT_EQ(HttpStatusToCode(400), 3);
  EXPECT_EQ(HttpStatusToCode(503), 14);
  EXPECT_EQ(HttpStatusToCode(500), 13);
}

TEST(HttpUrlTest, ParsesHostPortAndPrefix) {
  absl::StatusOr<HttpUrl> u = ParseHttpUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->prefix, "");
  u = ParseHttpUrl("http://gw.example/llm/v1/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->prefix, "/llm");  // the /v1 of an API-root URL is the paths' own
  u = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(ParseHttpUrl("https://x").status().code(), absl::StatusCode::kUnimplemented);
  for (const char* bad : {"127.0.0.1:8000", "http://", "http://h:0", "http://h:99999", "http://h:x"}) {
    absl::StatusOr<HttpUrl> b = ParseHttpUrl(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("--server"), absl::string_view::npos) << b.status();
  }
}

}  // namespace
}  // namespace beacon::loadtest
