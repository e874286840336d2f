#include "server/openai/tokenize_body.h"

#include <memory>
#include <string>

#include "engine/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/openai/r1_runtime.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

// The tokenizer endpoints' bodies without HTTP, on the R1 vocabulary (the
// HTTP routes and their status codes: tests/server/test_tokenize_limits.py).
class TokenizeBodyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Runtime>> rt = R1DummyRuntime();
    ASSERT_TRUE(rt.ok()) << rt.status();
    rt_ = *std::move(rt);
    options_.served_model = "m";
    options_.limits.context_length = 64;  // the token limit, as --max-tokenize-tokens 0 takes it
    options_.limits.max_detokenize_bytes = 16;
  }
  std::string Message(const absl::Status& s) { return std::string(s.message()); }

  std::unique_ptr<Runtime> rt_;
  TokenizeOptions options_;
};

TEST_F(TokenizeBodyTest, TokenizeAnswersAndBoundsIds) {
  absl::StatusOr<nlohmann::json> out =
      TokenizeBody(R"({"prompt": "Hello world", "return_token_strs": true})", *rt_->tokenizer(), options_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["count"], (*out)["tokens"].size());
  EXPECT_EQ((*out)["token_strs"].size(), (*out)["tokens"].size());
  EXPECT_EQ((*out)["max_model_len"], 64);
  // Past the token limit: refused naming the input.
  std::string big(400, 'x');
  for (size_t i = 1; i < big.size(); i += 2) big[i] = ' ';
  EXPECT_THAT(Message(TokenizeBody(R"({"prompt": ")" + big + R"("})", *rt_->tokenizer(), options_).status()),
              HasSubstr("prompt: makes 20"));  // this API's field, not gRPC's "text"
  EXPECT_THAT(Message(TokenizeBody(R"({"prompt": "a", "bogus": 1})", *rt_->tokenizer(), options_).status()),
              HasSubstr("bogus: unrecognized request argument"));
  EXPECT_EQ(TokenizeBody(R"({"prompt": "a", "model": "other"})", *rt_->tokenizer(), options_).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(TokenizeBody(R"({"prompt": "a", "messages": []})", *rt_->tokenizer(), options_).status()),
              HasSubstr("give exactly one of prompt and messages"));
}

TEST_F(TokenizeBodyTest, DetokenizeAnswersAndBoundsText) {
  absl::StatusOr<nlohmann::json> out = DetokenizeBody(R"({"tokens": [9707]})", *rt_->tokenizer(), options_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)["prompt"].get<std::string>().empty());
  EXPECT_THAT(Message(DetokenizeBody(R"({"tokens": [-1]})", *rt_->tokenizer(), options_).status()),
              HasSubstr("tokens[0]"));
  // More text than max_detokenize_bytes (16): refused, not built.
  EXPECT_THAT(Message(DetokenizeBody(R"({"tokens": [9707, 9707, 9707, 9707, 9707, 9707, 9707, 9707]})",
                                     *rt_->tokenizer(), options_)
                          .status()),
              HasSubstr("tokens"));
  std::string many = R"({"tokens": [)";
  for (int i = 0; i < 65; ++i) many += i ? ",1" : "1";
  EXPECT_THAT(Message(DetokenizeBody(many + "]}", *rt_->tokenizer(), options_).status()),
              HasSubstr("has 65 token ids; at most 64"));
}

}  // namespace
}  // namespace beacon
