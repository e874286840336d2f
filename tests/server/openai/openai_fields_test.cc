// Every field of OpenAiFields() is honoured or refused, never ignored: this
// test holds, per field, a request that uses it and what must come of it (a
// check on the parsed request, or an error naming the field), and fails when
// a field is listed without a case here or a case names no listed field.
// Unknown fields and the other endpoint's fields are refused by name.
#include "server/openai/openai_fields.h"

#include <functional>
#include <map>
#include <set>
#include <string>

#include "engine/grammar/grammar_spec.h"
#include "engine/tools/tool_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/openai/openai_request.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

struct Case {
  OpenAiEndpoint endpoint;
  std::string fields;  // JSON members added to a minimal body
  // Honoured: checks the parsed request. Empty: must be refused naming the field.
  std::function<bool(const OpenAiRequest&)> honoured;
};

constexpr OpenAiEndpoint kC = OpenAiEndpoint::kCompletions;
constexpr OpenAiEndpoint kChat = OpenAiEndpoint::kChatCompletions;

const std::map<std::string, Case>& Cases() {
  using R = const OpenAiRequest&;
  static const auto* cases = new std::map<std::string, Case>{
      {"model", {kC, R"("model": "m")", [](R r) { return r.model == "m"; }}},
      {"prompt", {kC, "", [](R r) { return r.serve.text == "hi"; }}},
      {"messages", {kChat, "", [](R r) { return r.serve.messages.size() == 1; }}},
      {"max_tokens", {kC, R"("max_tokens": 7)", [](R r) { return r.serve.max_tokens == 7; }}},
      {"max_completion_tokens", {kChat, R"("max_completion_tokens": 9)", [](R r) { return r.serve.max_tokens == 9; }}},
      {"temperature", {kC, R"("temperature": 0.25)", [](R r) { return r.serve.temperature == 0.25f; }}},
      {"top_p", {kC, R"("top_p": 0.5)", [](R r) { return r.serve.top_p == 0.5f; }}},
      {"n", {kC, R"("n": 3)", [](R r) { return r.serve.n == 3; }}},
      {"stream", {kC, R"("stream": true)", [](R r) { return r.stream; }}},
      {"stream_options",
       {kC, R"("stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true})",
        [](R r) { return r.include_usage && r.continuous_usage; }}},
      {"stop", {kC, R"("stop": ["x", "y"])", [](R r) { return r.serve.stop.size() == 2; }}},
      {"presence_penalty",
       {kC, R"("presence_penalty": 0.5)", [](R r) { return r.serve.sampling.presence_penalty == 0.5f; }}},
      {"frequency_penalty",
       {kC, R"("frequency_penalty": -0.5)", [](R r) { return r.serve.sampling.frequency_penalty == -0.5f; }}},
      {"logit_bias",
       {kC, R"("logit_bias": {"12": -3, "5": 100})",
        [](R r) {
          return r.serve.sampling.logit_bias == std::vector<std::pair<int32_t, float>>{{5, 100.0f}, {12, -3.0f}};
        }}},
      {"seed", {kC, R"("seed": 99)", [](R r) { return r.serve.sampling.seed == 99u; }}},
      {"user", {kC, R"("user": "u-1")", [](R r) { return r.user == "u-1"; }}},
      {"logprobs",
       {kC, R"("logprobs": 3)", [](R r) { return r.serve.logprobs == 3 && r.serve.prompt_logprobs == -1; }}},
      {"top_logprobs", {kChat, R"("logprobs": true, "top_logprobs": 4)", [](R r) { return r.serve.logprobs == 4; }}},
      {"echo", {kC, R"("echo": true, "logprobs": 2)", [](R r) { return r.echo && r.serve.prompt_logprobs == 2; }}},
      {"best_of", {kC, R"("best_of": 2)", nullptr}},
      {"suffix", {kC, R"("suffix": "end")", nullptr}},
      {"modalities", {kChat, R"("modalities": ["text", "audio"])", nullptr}},
      {"audio", {kChat, R"("audio": {"voice": "alloy", "format": "wav"})", nullptr}},
      {"prediction", {kChat, R"("prediction": {"type": "content", "content": "x"})", nullptr}},
      {"store", {kChat, R"("store": true)", nullptr}},
      {"metadata", {kChat, R"("metadata": {"k": "v"})", nullptr}},
      {"service_tier", {kC, R"("service_tier": "flex")", nullptr}},
      {"web_search_options", {kChat, R"("web_search_options": {})", nullptr}},
      {"top_k", {kC, R"("top_k": 40)", [](R r) { return r.serve.top_k == 40; }}},
      {"min_p", {kC, R"("min_p": 0.1)", [](R r) { return r.serve.min_p == 0.1f; }}},
      {"repetition_penalty",
       {kC, R"("repetition_penalty": 1.2)", [](R r) { return r.serve.repetition_penalty == 1.2f; }}},
      {"min_tokens", {kC, R"("min_tokens": 3)", [](R r) { return r.serve.min_tokens == 3; }}},
      {"ignore_eos", {kC, R"("ignore_eos": true)", [](R r) { return r.serve.ignore_eos; }}},
      {"stop_token_ids", {kC, R"("stop_token_ids": [4, 5])", [](R r) { return r.serve.stop_token_ids.size() == 2; }}},
      {"skip_special_tokens",
       {kC, R"("skip_special_tokens": false)", [](R r) { return !r.serve.skip_special_tokens; }}},
      {"include_stop_str_in_output",
       {kC, R"("include_stop_str_in_output": true)", [](R r) { return r.serve.include_stop_str_in_output; }}},
      {"prompt_logprobs",
       {kChat, R"("prompt_logprobs": 2)", [](R r) { return r.serve.prompt_logprobs == 2 && r.prompt_logprobs_field; }}},
      {"return_tokens_as_token_ids",
       {kC, R"("return_tokens_as_token_ids": true)", [](R r) { return r.tokens_as_ids; }}},
      {"add_generation_prompt",
       {kChat, R"("add_generation_prompt": false)", [](R r) { return !r.serve.add_generation_prompt; }}},
      {"chat_template_kwargs",
       {kChat, R"("chat_template_kwargs": {"enable_thinking": false})",
        [](R r) { return r.serve.chat_template_kwargs.contains("enable_thinking"); }}},
      {"request_id", {kC, R"("request_id": "abc")", [](R r) { return r.serve.request_id == "abc"; }}},
      {"kv_policy", {kC, R"("kv_policy": "snapkv")", [](R r) { return r.serve.kv_policy == "snapkv"; }}},
      {"kv_budget", {kC, R"("kv_budget": 300)", [](R r) { return r.serve.kv_budget == 300; }}},
      {"kv_budget_bytes",
       {kC, R"("kv_budget_bytes": 8000000)", [](R r) { return r.serve.kv_budget_bytes == 8000000; }}},
      {"cache_salt", {kC, R"("cache_salt": "tenant-a")", [](R r) { return r.serve.cache_salt == "tenant-a"; }}},
      {"time_limit_ms", {kC, R"("time_limit_ms": 1500)", [](R r) { return r.serve.time_limit_ms == 1500u; }}},
      {"max_reasoning_tokens",
       {kChat, R"("max_reasoning_tokens": 64)", [](R r) { return r.serve.max_reasoning_tokens == 64; }}},
      // Structured output and tool calling (openai_structured.h).
      {"tools",
       {kChat, R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])",
        [](R r) {
          return r.serve.tools.tools.size() == 1 && r.serve.tools.tools[0].name == "f" &&
                 r.serve.tools.choice.mode == ToolChoice::Mode::kAuto;
        }}},
      {"tool_choice",
       {kChat, R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function",
           "function": {"name": "f"}})",
        [](R r) { return r.serve.tools.choice.mode == ToolChoice::Mode::kNamed && r.serve.tools.choice.name == "f"; }}},
      {"parallel_tool_calls",
       {kChat, R"("tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": false)",
        [](R r) { return !r.serve.tools.parallel; }}},
      {"functions", {kChat, R"("functions": [{"name": "f"}])", [](R r) { return r.serve.tools.tools.size() == 1; }}},
      {"function_call",
       {kChat, R"("functions": [{"name": "f"}], "function_call": {"name": "f"})",
        [](R r) { return r.serve.tools.choice.mode == ToolChoice::Mode::kNamed; }}},
      {"response_format",
       {kChat, R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
           "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}})",
        [](R r) {
          // The schema's properties keep the client's order (b before a).
          return r.serve.structured.has_value() && r.serve.structured->kind == GrammarKind::kJsonSchema &&
                 r.serve.structured->strict &&
                 r.serve.structured->source.find(R"("b")") < r.serve.structured->source.find(R"("a")");
        }}},
      {"structured_outputs",
       {kC, R"("structured_outputs": {"choice": ["x", "y"]})",
        [](R r) { return r.serve.structured.has_value() && r.serve.structured->choices.size() == 2; }}},
      {"constrain_tool_calls",
       {kChat, R"("tools": [{"type": "function", "function": {"name": "f"}}], "constrain_tool_calls": true)",
        [](R r) { return r.serve.tools.constrain_auto; }}},
      {"reasoning_effort",
       {kChat, R"("reasoning_effort": "low")", [](R r) { return r.serve.reasoning_effort == "low"; }}},
  };
  return *cases;
}

std::string Body(OpenAiEndpoint e, const std::string& fields) {
  const std::string input = e == kC ? R"("prompt": "hi")" : R"("messages": [{"role": "user", "content": "hi"}])";
  return "{" + input + (fields.empty() ? "" : ", " + fields) + "}";
}

TEST(OpenAiFieldsTest, EveryFieldHasACaseAndEveryCaseAField) {
  std::set<std::string> listed;
  for (const OpenAiField& f : OpenAiFields()) {
    listed.insert(f.name);
    EXPECT_TRUE(Cases().contains(f.name)) << "field '" << f.name << "' has no case in this test";
  }
  for (const auto& [name, c] : Cases()) EXPECT_TRUE(listed.contains(name)) << "case '" << name << "' is no field";
}

TEST(OpenAiFieldsTest, EachFieldIsHonouredOrRefusedByName) {
  for (const auto& [name, c] : Cases()) {
    SCOPED_TRACE(name);
    const absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(c.endpoint, Body(c.endpoint, c.fields), "m");
    if (c.honoured) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(c.honoured(*r)) << "parsed, but the field had no effect";
    } else {
      ASSERT_FALSE(r.ok()) << "accepted a field whose feature is not implemented";
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(r.status().message()), HasSubstr(name + ":"));
    }
  }
}

TEST(OpenAiFieldsTest, RefusedFeaturesAreAcceptedAtTheirDoNothingValues) {
  for (const char* fields : {R"("tools": [], "tool_choice": "none", "parallel_tool_calls": false)",
                             R"("response_format": {"type": "text"}, "modalities": ["text"], "store": false)",
                             R"("audio": null, "metadata": null, "service_tier": "auto", "reasoning_effort": null)"}) {
    const absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(kChat, Body(kChat, fields), "m");
    EXPECT_TRUE(r.ok()) << fields << ": " << r.status();
  }
  EXPECT_TRUE(ParseOpenAiRequest(kC, Body(kC, R"("suffix": null, "best_of": 1, "n": 1)"), "m").ok());
}

TEST(OpenAiFieldsTest, UnknownAndOtherEndpointFieldsAreRefusedByName) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(kC, Body(kC, R"("temprature": 0.5)"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("temprature: unrecognized request argument"));
  r = ParseOpenAiRequest(kChat, Body(kChat, R"("echo": true)"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("echo: is a /v1/completions field"));
  r = ParseOpenAiRequest(kC, Body(kC, R"("top_logprobs": 2)"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("top_logprobs: is a /v1/chat/completions field"));
  r = ParseOpenAiRequest(kC, Body(kC, R"("stream": true, "stream_options": {"include_usage": true, "x": 1})"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("stream_options.x: unrecognized"));
}

TEST(OpenAiFieldsTest, LogprobShapesAreCheckedPerEndpoint) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(kChat, Body(kChat, R"("top_logprobs": 2)"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("top_logprobs: needs logprobs: true"));
  r = ParseOpenAiRequest(kChat, Body(kChat, R"("logprobs": 3)"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("logprobs: must be true or false"));
  r = ParseOpenAiRequest(kC, Body(kC, R"("logprobs": true)"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("logprobs: must be an integer"));
  r = ParseOpenAiRequest(kC, Body(kC, R"("logit_bias": {"x1": 2})"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("must be a token id"));
  r = ParseOpenAiRequest(kC, Body(kC, R"("logit_bias": {"3": 101})"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("101 is outside [-100, 100]"));
}

}  // namespace
}  // namespace beacon
