// PrepareRequest's handling of the sampling defaults and the output fields
// (logprobs, min_tokens, logit_bias, stop-string and special-token options),
// the gRPC mapping of them (FromProto), and DetokenizeIds. Uses the default
// model's tokenizer.
#include <limits>

#include "engine/serving/serve_request.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/grpc/grpc_convert.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

class ServeOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "models/default.gguf missing";
    limits_.context_length = rt_->config().context_length;
    limits_.default_max_tokens = 100;
  }
  static ServeRequest Text() {
    ServeRequest r;
    r.input = ServeRequest::Input::kText;
    r.text = "hi";
    return r;
  }
  absl::StatusOr<PreparedRequest> Prepare(const ServeRequest& r) {
    return PrepareRequest(r, *rt_->tokenizer(), limits_);
  }
  void ExpectInvalid(const ServeRequest& r, const std::string& needle) {
    absl::StatusOr<PreparedRequest> p = Prepare(r);
    ASSERT_FALSE(p.ok()) << "accepted; expected " << needle;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(needle));
  }
  Runtime* rt_ = nullptr;
  ServeLimits limits_;
};

TEST_F(ServeOutputTest, LeftOutSamplingFieldsTakeTheServersDefaults) {
  limits_.defaults.temperature = 0.6f;
  limits_.defaults.top_p = 0.9f;
  limits_.defaults.top_k = 20;
  limits_.defaults.min_p = 0.05f;
  limits_.defaults.repetition_penalty = 1.1f;
  absl::StatusOr<PreparedRequest> p = Prepare(Text());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.sampling.temperature, 0.6f);
  EXPECT_EQ(p->options.sampling.top_p, 0.9f);
  EXPECT_EQ(p->options.sampling.top_k, 20);
  EXPECT_EQ(p->options.sampling.min_p, 0.05f);
  EXPECT_EQ(p->options.sampling.repetition_penalty, 1.1f);
  ServeRequest r = Text();
  r.temperature = 0.0f;  // sent: wins, 0 included
  r.top_k = 0;
  p = Prepare(r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->options.sampling.temperature, 0.0f);
  EXPECT_EQ(p->options.sampling.top_k, 0);
  EXPECT_EQ(p->options.sampling.top_p, 0.9f);
  // ServeLimits' own defaults are OpenAI's: temperature 1.
  EXPECT_EQ(ServeLimits().defaults.temperature, 1.0f);
}

TEST_F(ServeOutputTest, OutputFieldsReachTheGenerationOptions) {
  limits_.logprobs_mode = LogprobsMode::kProcessed;
  ServeRequest r = Text();
  r.logprobs = 4;
  r.prompt_logprobs = 0;
  r.min_tokens = 3;
  r.include_stop_str_in_output = true;
  r.skip_special_tokens = false;
  r.sampling.logit_bias = {{7, -2.0f}};
  absl::StatusOr<PreparedRequest> p = Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.logprobs, 4);
  EXPECT_EQ(p->options.prompt_logprobs, 0);
  EXPECT_EQ(p->options.logprobs_mode, LogprobsMode::kProcessed);
  EXPECT_EQ(p->options.min_tokens, 3);
  EXPECT_TRUE(p->options.include_stop_str_in_output);
  EXPECT_FALSE(p->options.skip_special_tokens);
  EXPECT_EQ(p->options.sampling.logit_bias.size(), 1u);
}

TEST_F(ServeOutputTest, OutOfRangeOutputFieldsAreRefusedByName) {
  ServeRequest r = Text();
  r.logprobs = 21;
  ExpectInvalid(r, "logprobs: 21 is outside [0, 20]");
  limits_.max_logprobs = 5;
  r.logprobs = 6;
  ExpectInvalid(r, "logprobs: 6 is outside [0, 5]");
  r = Text();
  r.prompt_logprobs = -3;
  ExpectInvalid(r, "prompt_logprobs: -3");
  r = Text();
  r.max_tokens = 10;
  r.min_tokens = 11;
  ExpectInvalid(r, "min_tokens: 11 is outside [0, max_tokens = 10]");
  r = Text();
  r.sampling.logit_bias = {{rt_->tokenizer()->vocab_size(), 1.0f}};
  ExpectInvalid(r, "logit_bias: token");
  r = Text();
  limits_.max_logit_bias = 2;
  r.sampling.logit_bias = {{1, 1.0f}, {2, 1.0f}, {3, 1.0f}};
  ExpectInvalid(r, "logit_bias: has 3 entries; at most 2");
}

TEST_F(ServeOutputTest, GrpcFieldsMapOntoTheRequest) {
  v1::GenerateRequest q;
  q.set_text("hi");
  q.mutable_sampling()->set_temperature(0.0f);
  (*q.mutable_sampling()->mutable_logit_bias())[9] = 1.5f;
  (*q.mutable_sampling()->mutable_logit_bias())[3] = -1.0f;
  q.mutable_stopping()->set_min_tokens(2);
  q.mutable_stopping()->set_include_stop_str_in_output(true);
  q.mutable_output()->set_logprobs(3);
  q.mutable_output()->set_skip_special_tokens(false);
  ServeRequest r = FromProto(q);
  ASSERT_TRUE(r.temperature.has_value());
  EXPECT_EQ(*r.temperature, 0.0f);  // explicit 0 is greedy, not "left out"
  EXPECT_FALSE(r.top_p.has_value());
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, -1.0f}, {9, 1.5f}}));
  EXPECT_EQ(r.min_tokens, 2);
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_EQ(r.prompt_logprobs, -1);
  EXPECT_FALSE(r.skip_special_tokens);
  // Left out: no temperature, skip_special_tokens default true.
  v1::GenerateRequest bare;
  bare.set_text("hi");
  const ServeRequest b = FromProto(bare);
  EXPECT_FALSE(b.temperature.has_value());
  EXPECT_TRUE(b.skip_special_tokens);
  EXPECT_EQ(b.logprobs, -1);
}

TEST_F(ServeOutputTest, DetokenizeIdsChecksTheVocabulary) {
  const Tokenizer& tok = *rt_->tokenizer();
  const std::vector<int32_t> ids = tok.Encode("Hello world", false, false);
  EXPECT_EQ(*DetokenizeIds(ids, tok, true, "ids"), "Hello world");
  const int32_t im_start = tok.TokenId("<|im_start|>");
  ASSERT_GE(im_start, 0);
  const std::vector<int32_t> special = {im_start, ids[0]};
  EXPECT_EQ(*DetokenizeIds(special, tok, true, "ids"), "Hello");
  EXPECT_EQ(*DetokenizeIds(special, tok, false, "ids"), "<|im_start|>Hello");
  const std::vector<int32_t> bad = {1, -1};
  const absl::StatusOr<std::string> r = DetokenizeIds(bad, tok, true, "tokens");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("tokens[1]: -1 is outside the vocabulary"));
}

TEST(GrpcRichErrorsTest, FieldViolationsAndRetryInfoRideInTheDetails) {
  grpc::Status s = ToGrpc(absl::InvalidArgumentError("messages[0].role: 'robot' is not one of system, user"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  google::rpc::Status rich;
  ASSERT_TRUE(rich.ParseFromString(s.error_details()));
  EXPECT_EQ(rich.code(), 3);
  ASSERT_EQ(rich.details_size(), 1);
  google::rpc::BadRequest bad;
  ASSERT_TRUE(rich.details(0).UnpackTo(&bad));
  ASSERT_EQ(bad.field_violations_size(), 1);
  EXPECT_EQ(bad.field_violations(0).field(), "messages[0].role");
  EXPECT_EQ(bad.field_violations(0).description(), "'robot' is not one of system, user");

  s = ToGrpc(absl::ResourceExhaustedError("waiting queue full (1 waiting)"));
  ASSERT_TRUE(rich.ParseFromString(s.error_details()));
  google::rpc::RetryInfo retry;
  ASSERT_EQ(rich.details_size(), 1);
  ASSERT_TRUE(rich.details(0).UnpackTo(&retry));
  EXPECT_EQ(retry.retry_delay().seconds(), kRetryDelaySeconds);
  s = ToGrpc(absl::UnavailableError("draining"));
  ASSERT_TRUE(rich.ParseFromString(s.error_details()));
  EXPECT_TRUE(rich.details(0).Is<google::rpc::RetryInfo>());
  // No field named, nothing to add: plain status.
  EXPECT_TRUE(ToGrpc(absl::InvalidArgumentError("the body must be a JSON object")).error_details().empty());
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
}

TEST(FieldOfTest, OnlyAFieldPathBeforeTheColon) {
  EXPECT_EQ(FieldOf("logit_bias[\"12\"]: the bias must be a number"), "logit_bias[\"12\"]");
  EXPECT_EQ(FieldOf("stream_options.x: unrecognized"), "stream_options.x");
  EXPECT_EQ(FieldOf("Content-Type must be application/json"), "");
  EXPECT_EQ(FieldOf("model: 'x' is not served here"), "model");
  EXPECT_EQ(FieldOf("JSON nesting deeper than 64 levels: refused"), "");
  EXPECT_EQ(FieldOf(": nothing"), "");
}

}  // namespace
}  // namespace beacon
