// ParseOpenAiRequest: bodies are parsed within the JSON limits, integer
// fields keep the value the client sent (the server's own limits are
// PrepareRequest's, which then reports that value), and a list of numbers
// is a token-id prompt, not a batch.
#include "server/openai/openai_request.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"
#include "tests/server/openai/r1_runtime.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "m";

absl::StatusOr<OpenAiRequest> Completion(const std::string& fields) {
  return ParseOpenAiRequest(OpenAiEndpoint::kCompletions, "{\"prompt\": \"hi\"" + fields + "}", kModel);
}

void ExpectInvalid(const absl::StatusOr<OpenAiRequest>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "accepted; expected an error containing " << needle;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(needle));
}

TEST(OpenAiRequestTest, BodiesAreParsedWithinTheJsonLimits) {
  const std::string deep = "{\"prompt\": " + std::string(100, '[') + std::string(100, ']') + "}";
  ExpectInvalid(ParseOpenAiRequest(OpenAiEndpoint::kCompletions, deep, kModel), "JSON nesting deeper than 64 levels");
  ExpectInvalid(ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, std::string(8 << 20, '['), kModel),
                "deeper than 64 levels");
  JsonLimits small;
  small.max_values = 4;
  ExpectInvalid(ParseOpenAiRequest(OpenAiEndpoint::kCompletions, R"({"prompt": [1, 2, 3, 4]})", kModel, small),
                "JSON with more than 4 values");
  ExpectInvalid(ParseOpenAiRequest(OpenAiEndpoint::kCompletions, "{\"prompt\": ", kModel), "not valid JSON");
}

TEST(OpenAiRequestTest, ServerLimitedIntegersPassThroughAsSent) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"(, "max_tokens": 2147483648, "kv_budget": 99999999999)");
  ASSERT_TRUE(r.ok()) << r.status();  // PrepareRequest knows the limits
  EXPECT_EQ(r->serve.max_tokens, int64_t{2147483648});
  EXPECT_EQ(r->serve.kv_budget, int64_t{99999999999});
  EXPECT_TRUE(r->serve.oversized_ints.empty());

  // Past int64: saturated, with the digits kept for the error message.
  r = Completion(R"(, "max_tokens": 18446744073709551615, "kv_budget": 18446744073709551616)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.max_tokens, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r->serve.oversized_ints.at("max_tokens"), "18446744073709551615");
  EXPECT_EQ(r->serve.oversized_ints.at("kv_budget"), "18446744073709551616");
  r = Completion(R"(, "kv_budget": -18446744073709551616)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.kv_budget, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(r->serve.oversized_ints.at("kv_budget"), "-18446744073709551616");

  // The newer name wins, and its value is reported under max_tokens.
  r = Completion(R"(, "max_tokens": 5, "max_completion_tokens": 9223372036854775808)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.oversized_ints.at("max_tokens"), "9223372036854775808");

  ExpectInvalid(Completion(R"(, "max_tokens": 0)"), "max_tokens: 0 is less than 1");
  // Past 64 bits nlohmann::json holds a double: shown to its precision.
  ExpectInvalid(Completion(R"(, "max_tokens": -18446744073709551616)"), "max_tokens: -18446744073709551616 is less");
  ExpectInvalid(Completion(R"(, "max_tokens": 2.5)"), "max_tokens: must be an integer");
  ExpectInvalid(Completion(R"(, "max_tokens": "5")"), "max_tokens: must be an integer");
}

TEST(OpenAiRequestTest, OwnRangesShowTheSentValue) {
  // n's range is the server's (PrepareRequest): passed on as sent.
  absl::StatusOr<OpenAiRequest> big_n = Completion(R"(, "n": 18446744073709551615)");
  ASSERT_TRUE(big_n.ok()) << big_n.status();
  EXPECT_EQ(big_n->serve.n, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(big_n->serve.oversized_ints.at("n"), "18446744073709551615");
  ExpectInvalid(Completion(R"(, "n": 1.5)"), "n: must be an integer");
  ExpectInvalid(Completion(R"(, "top_k": 4294967296)"), "top_k: 4294967296 is outside [-1, 2147483647]");
  ExpectInvalid(Completion(R"(, "top_k": -2)"), "top_k: -2 is outside [-1, 2147483647]");
  ExpectInvalid(Completion(R"(, "time_limit_ms": 18446744073709551615)"),
                "time_limit_ms: 18446744073709551615 is outside [0, 4294967295]");
  ExpectInvalid(Completion(R"(, "seed": 18446744073709551616)"), "seed: 18446744073709551616 is outside");
  absl::StatusOr<OpenAiRequest> r = Completion(R"(, "top_k": 100000000, "seed": 18446744073709551615)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.top_k, 100000000);
  EXPECT_EQ(r->serve.sampling.seed, 18446744073709551615ull);
}

TEST(OpenAiRequestTest, ListsOfNumbersAreTokenIds) {
  auto prompt = [](const std::string& p) {
    return ParseOpenAiRequest(OpenAiEndpoint::kCompletions, "{\"prompt\": " + p + "}", kModel);
  };
  ExpectInvalid(prompt("[1.5, 2]"), "prompt[0]: must be a token id (integer)");
  ExpectInvalid(prompt("[2, 1.5]"), "prompt[1]: must be a token id (integer)");
  ExpectInvalid(prompt("[2, \"a\"]"), "prompt[1]: must be a token id (integer)");
  ExpectInvalid(prompt("[[1.5]]"), "prompt[0][0]: must be a token id (integer)");
  ExpectInvalid(prompt("[4294967296]"), "prompt[0]: 4294967296 is not a token id");
  ExpectInvalid(prompt("[-1]"), "prompt[0]: -1 is not a token id");
  ExpectInvalid(prompt("[\"a\", \"b\"]"), "batched prompts are not supported");
  ExpectInvalid(prompt("[[1], [2]]"), "batched prompts are not supported");
  ExpectInvalid(prompt("[\"a\", [2]]"), "prompt: must be a string, a list of one string, or a list of token ids");
  ExpectInvalid(prompt("[]"), "prompt: must be a string");
  ExpectInvalid(prompt("[true]"), "prompt: must be a string");
  absl::StatusOr<OpenAiRequest> r = prompt("[1, 2147483647]");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.input, ServeRequest::Input::kTokens);
  EXPECT_EQ(r->serve.token_ids, (std::vector<int32_t>{1, 2147483647}));
  r = prompt("[[3, 4]]");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.token_ids, (std::vector<int32_t>{3, 4}));
}

TEST(OpenAiRequestTest, RequestIdIsTakenAsSent) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"(, "request_id": "a\nb")");
  ASSERT_TRUE(r.ok()) << r.status();  // PrepareRequest refuses it, for both APIs
  EXPECT_EQ(r->serve.request_id, "a\nb");
  ExpectInvalid(Completion(R"(, "request_id": 5)"), "request_id: must be a string");
}

// Parsed and prepared as the HTTP route does: the error shows what the
// client sent and the server's real limit.
TEST(OpenAiRequestTest, PrepareRequestReportsTheSentValueAndTheServersLimit) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  ServeLimits limits;
  limits.context_length = rt->config().context_length;
  limits.max_tokens_limit = 4096;
  limits.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  limits.kv_default.budget = 256;
  limits.kv_limits.min_budget = 32;
  limits.kv_limits.max_budget = 2048;
  auto prepare = [&](const std::string& fields) -> absl::Status {
    absl::StatusOr<OpenAiRequest> r = Completion(fields);
    if (!r.ok()) return r.status();
    return PrepareRequest(r->serve, *rt->tokenizer(), limits).status();
  };
  EXPECT_THAT(std::string(prepare(R"(, "max_tokens": 2147483648)").message()),
              HasSubstr("max_tokens: 2147483648 is outside [1, 4096]"));
  EXPECT_THAT(std::string(prepare(R"(, "max_tokens": 18446744073709551615)").message()),
              HasSubstr("max_tokens: 18446744073709551615 is outside [1, 4096]"));
  EXPECT_THAT(std::string(prepare(R"(, "max_completion_tokens": 4097)").message()),
              HasSubstr("max_tokens: 4097 is outside [1, 4096]"));
  EXPECT_THAT(std::string(prepare(R"(, "kv_budget": 4294967296)").message()),
              HasSubstr("kv_budget: 4294967296 is outside the server's range [32, 2048]"));
  EXPECT_THAT(std::string(prepare(R"(, "kv_budget": 4096)").message()),
              HasSubstr("kv_budget: 4096 is outside the server's range [32, 2048]"));
  EXPECT_THAT(std::string(prepare(R"(, "request_id": "a\nb")").message()),
              HasSubstr("request_id: has the control character U+000A"));
  EXPECT_TRUE(prepare(R"(, "max_tokens": 4096, "kv_budget": 2048, "request_id": "mine-1")").ok());
}

absl::StatusOr<OpenAiRequest> ChatBody(const std::string& fields) {
  return ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions,
                            R"({"messages": [{"role": "user", "content": "hi"}])" + fields + "}", kModel);
}

TEST(OpenAiRequestTest, ChatTemplateKwargsAreAnObjectOnTheChatEndpointOnly) {
  absl::StatusOr<OpenAiRequest> r = ChatBody(
      R"(, "chat_template_kwargs": {"enable_thinking": false, "depth": 2, "nested": {"b": [1, "x"], "a": null}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const jinja::Json& k = r->serve.chat_template_kwargs;
  ASSERT_TRUE(k.is_object());
  EXPECT_EQ(k.size(), 3u);
  EXPECT_EQ(k.at("enable_thinking"), false);
  EXPECT_TRUE(k.at("depth").is_number_integer());
  EXPECT_EQ(k.at("depth"), 2);
  EXPECT_EQ(k.at("nested").dump(), R"({"a":null,"b":[1,"x"]})");
  // Absent and null: no variables.
  r = ChatBody("");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->serve.chat_template_kwargs.is_null());
  r = ChatBody(R"(, "chat_template_kwargs": null)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->serve.chat_template_kwargs.is_null());
  r = ChatBody(R"(, "chat_template_kwargs": {})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->serve.chat_template_kwargs.is_object());
  EXPECT_TRUE(r->serve.chat_template_kwargs.empty());

  ExpectInvalid(ChatBody(R"(, "chat_template_kwargs": [1])"), "chat_template_kwargs: must be an object");
  ExpectInvalid(ChatBody(R"(, "chat_template_kwargs": "enable_thinking")"), "chat_template_kwargs: must be an object");
  ExpectInvalid(ChatBody(R"(, "chat_template_kwargs": false)"), "chat_template_kwargs: must be an object");
  ExpectInvalid(Completion(R"(, "chat_template_kwargs": {"enable_thinking": false})"),
                "chat_template_kwargs: is a /v1/chat/completions field, not one of /v1/completions");
  // null on the completions endpoint is no value at all.
  r = Completion(R"(, "chat_template_kwargs": null)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->serve.chat_template_kwargs.is_null());
  // Reserved names are PrepareRequest's to refuse (for both APIs).
  r = ChatBody(R"(, "chat_template_kwargs": {"messages": []})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->serve.chat_template_kwargs.contains("messages"));
}

TEST(OpenAiRequestTest, MaxReasoningTokensPassesThroughAsSent) {
  absl::StatusOr<OpenAiRequest> r = ChatBody(R"(, "max_reasoning_tokens": 64)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.max_reasoning_tokens, int64_t{64});
  EXPECT_TRUE(r->serve.oversized_ints.empty());
  r = ChatBody("");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->serve.max_reasoning_tokens.has_value());
  r = ChatBody(R"(, "max_reasoning_tokens": null)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->serve.max_reasoning_tokens.has_value());
  // Ranges are PrepareRequest's: negative and past 32 bits pass as sent.
  r = ChatBody(R"(, "max_reasoning_tokens": -5)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.max_reasoning_tokens, int64_t{-5});
  r = ChatBody(R"(, "max_reasoning_tokens": 4294967296)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.max_reasoning_tokens, int64_t{4294967296});
  EXPECT_TRUE(r->serve.oversized_ints.empty());
  // Past int64: saturated, the digits kept.
  r = ChatBody(R"(, "max_reasoning_tokens": 18446744073709551615)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.max_reasoning_tokens, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r->serve.oversized_ints.at("max_reasoning_tokens"), "18446744073709551615");
  r = ChatBody(R"(, "max_reasoning_tokens": -18446744073709551616)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.max_reasoning_tokens, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(r->serve.oversized_ints.at("max_reasoning_tokens"), "-18446744073709551616");
  ExpectInvalid(ChatBody(R"(, "max_reasoning_tokens": 1.5)"), "max_reasoning_tokens: must be an integer");
  ExpectInvalid(ChatBody(R"(, "max_reasoning_tokens": "10")"), "max_reasoning_tokens: must be an integer");
  ExpectInvalid(ChatBody(R"(, "max_reasoning_tokens": true)"), "max_reasoning_tokens: must be an integer");
  // A chat field: the completions endpoint refuses it by name.
  ExpectInvalid(Completion(R"(, "max_reasoning_tokens": 3)"), "max_reasoning_tokens: is a /v1/chat/completions field");
}

TEST(OpenAiRequestTest, ReasoningContentIsAStringOrNull) {
  auto chat = [](const std::string& assistant_fields) {
    return ParseOpenAiRequest(
        OpenAiEndpoint::kChatCompletions,
        R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a")" + assistant_fields +
            R"(}, {"role": "user", "content": "more"}]})",
        kModel);
  };
  absl::StatusOr<OpenAiRequest> r = chat(R"(, "reasoning_content": "thought it through")");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->serve.messages.size(), 3u);
  EXPECT_FALSE(r->serve.messages[0].reasoning_content.has_value());
  EXPECT_EQ(r->serve.messages[1].reasoning_content, std::optional<std::string>("thought it through"));
  EXPECT_EQ(r->serve.messages[1].content, "a");
  EXPECT_FALSE(r->serve.messages[2].reasoning_content.has_value());
  r = chat(R"(, "reasoning_content": "")");  // empty is a value
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->serve.messages[1].reasoning_content, std::optional<std::string>(""));
  r = chat(R"(, "reasoning_content": null)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->serve.messages[1].reasoning_content.has_value());
  ExpectInvalid(chat(R"(, "reasoning_content": 5)"), "messages[1].reasoning_content: must be a string");
  ExpectInvalid(chat(R"(, "reasoning_content": ["a"])"), "messages[1].reasoning_content: must be a string");
  ExpectInvalid(chat(R"(, "reasoning_content": {"text": "a"})"), "messages[1].reasoning_content: must be a string");
}

// Parsed and prepared as the HTTP route does, on a reasoning model (the R1
// vocabulary over dummy weights): the reasoning fields reach the engine's
// options, and PrepareRequest's refusals show what the client sent.
TEST(OpenAiRequestTest, ReasoningFieldsReachPrepareRequest) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt = R1DummyRuntime();
  ASSERT_TRUE(rt.ok()) << rt.status();
  ServeLimits limits;
  limits.context_length = (*rt)->config().context_length;
  limits.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  absl::StatusOr<ReasoningSyntax> syntax = ResolveReasoningParser("auto", *(*rt)->tokenizer());
  ASSERT_TRUE(syntax.ok()) << syntax.status();
  limits.reasoning = *syntax;
  auto prepare = [&](const std::string& fields) -> absl::StatusOr<PreparedRequest> {
    absl::StatusOr<OpenAiRequest> r = ChatBody(fields);
    if (!r.ok()) return r.status();
    return PrepareRequest(r->serve, *(*rt)->tokenizer(), limits);
  };
  absl::StatusOr<PreparedRequest> p = prepare(R"(, "max_reasoning_tokens": 12)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.syntax.parser, ReasoningParser::kDeepSeekR1);
  EXPECT_TRUE(p->options.reasoning.starts_inside);
  EXPECT_EQ(p->options.reasoning.max_reasoning_tokens, 12);
  EXPECT_EQ(std::string(prepare(R"(, "max_reasoning_tokens": 18446744073709551615)").status().message()),
            "max_reasoning_tokens: 18446744073709551615 is outside [0, 2147483647] (0 = no limit)");
  EXPECT_EQ(std::string(prepare(R"(, "max_reasoning_tokens": -1)").status().message()),
            "max_reasoning_tokens: -1 is outside [0, 2147483647] (0 = no limit)");
  EXPECT_EQ(std::string(prepare(R"(, "chat_template_kwargs": {"bos_token": "x"})").status().message()),
            "chat_template_kwargs: 'bos_token' is set by the server from the request; it cannot be passed here");
  // Text input with the limit (gRPC can send one): PrepareRequest refuses it.
  absl::StatusOr<OpenAiRequest> text = Completion("");
  ASSERT_TRUE(text.ok()) << text.status();
  text->serve.max_reasoning_tokens = 3;
  EXPECT_EQ(std::string(PrepareRequest(text->serve, *(*rt)->tokenizer(), limits).status().message()),
            "max_reasoning_tokens: applies to chat input only");
}

}  // namespace
}  // namespace beacon
