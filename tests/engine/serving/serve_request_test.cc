// PrepareRequest: every kind of bad input is INVALID_ARGUMENT naming the
// field; good input becomes the prompt and options the engine runs, with the
// admission footprint of its KV policy. Uses the default model's tokenizer.
#include "engine/serving/serve_request.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv/policy/eviction_schedule.h"
#include "kv/policy/sequence_compressor.h"
#include "kv/serving/prefix_cache.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

class PrepareRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "models/default.gguf missing";
    limits_.context_length = rt_->config().context_length;
    limits_.default_max_tokens = 100;
    limits_.max_tokens_limit = 4096;
    limits_.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
    limits_.kv_default.budget = 256;
    limits_.kv_limits.min_budget = 32;
    limits_.kv_limits.max_budget = 2048;
  }
  static ServeRequest Text(std::string text) {
    ServeRequest r;
    r.input = ServeRequest::Input::kText;
    r.text = std::move(text);
    return r;
  }
  // Expects INVALID_ARGUMENT whose message contains `field`.
  void ExpectInvalid(const ServeRequest& r, const std::string& field) {
    absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
    ASSERT_FALSE(p.ok()) << "accepted; expected an error naming " << field;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(field));
  }

  Runtime* rt_ = nullptr;
  ServeLimits limits_;
};

TEST_F(PrepareRequestTest, GoodTextRequest) {
  ServeRequest r = Text("Hello there");
  r.max_tokens = 50;
  r.time_limit_ms = 1000;
  absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prompt, rt_->tokenizer()->Encode("Hello there", false, true));
  EXPECT_EQ(p->options.max_tokens, 50);
  EXPECT_EQ(p->options.kv.policy, KvPolicyKind::kBeacon);
  const int32_t n = static_cast<int32_t>(p->prompt.size());
  EXPECT_EQ(p->peak_slots, SequenceCompressor::PeakSlots(p->options.kv, n, 50));
  EXPECT_EQ(p->deadline, r.arrival + std::chrono::milliseconds(1000));
}

TEST_F(PrepareRequestTest, DefaultsAndContextClamp) {
  absl::StatusOr<PreparedRequest> p = PrepareRequest(Text("hi"), *rt_->tokenizer(), limits_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.max_tokens, 100);  // the server's default
  EXPECT_EQ(p->deadline, SchedClock::time_point::max());
  // max_tokens within the limit but past the context: clamped, footprint too.
  limits_.max_tokens_limit = 0;
  ServeRequest r = Text("hi");
  r.max_tokens = limits_.context_length;
  r.kv_policy = "full";
  p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.max_tokens, limits_.context_length - static_cast<int32_t>(p->prompt.size()));
  EXPECT_EQ(p->peak_slots, limits_.context_length);
}

TEST_F(PrepareRequestTest, CompressingFootprintIsConstantInOutputLength) {
  ServeRequest r = Text("hi");
  r.max_tokens = 4000;
  absl::StatusOr<PreparedRequest> a = PrepareRequest(r, *rt_->tokenizer(), limits_);
  r.max_tokens = 2000;
  absl::StatusOr<PreparedRequest> b = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->peak_slots, b->peak_slots);
  EXPECT_EQ(a->peak_slots, static_cast<int32_t>(a->prompt.size()) + 256 + limits_.kv_default.interval);
}

TEST_F(PrepareRequestTest, EachRequestAndSampleHasItsOwnEvictionPhase) {
  ServeRequest r = Text("Twelve apples, three eaten: how many are left?");
  r.max_tokens = 500;
  absl::StatusOr<PreparedRequest> a = PrepareRequest(r, *rt_->tokenizer(), limits_);
  absl::StatusOr<PreparedRequest> b = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(a.ok() && b.ok());
  const int32_t interval = a->options.kv.interval;
  EXPECT_EQ(a->options.kv.eviction_phase, EvictionSchedule::SpreadPhase(a->prompt, 0, 1, interval));
  EXPECT_EQ(a->options.kv.eviction_phase, b->options.kv.eviction_phase);  // the same request, the same phase
  // The phase never changes what admission reserves.
  KvPolicyOptions aligned = a->options.kv;
  aligned.eviction_phase = 0;
  EXPECT_EQ(a->peak_slots, SequenceCompressor::PeakSlots(aligned, static_cast<int32_t>(a->prompt.size()), 500));

  // n = 4: each sample its own phase, a quarter of the interval apart.
  r.n = 4;
  absl::StatusOr<PreparedRequest> g = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<PreparedRequest> samples = ExpandSamples(*g);
  ASSERT_EQ(samples.size(), 4u);
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(samples[i].options.kv.eviction_phase, EvictionSchedule::SpreadPhase(g->prompt, i, 4, interval)) << i;
    EXPECT_TRUE(samples[i].options.kv.Validate().ok());
  }
  EXPECT_NE(samples[0].options.kv.eviction_phase, samples[1].options.kv.eviction_phase);

  // Aligned (--kv-eviction-phase aligned), or a policy that never evicts: 0.
  limits_.spread_eviction_phase = false;
  for (const PreparedRequest& s : ExpandSamples(*PrepareRequest(r, *rt_->tokenizer(), limits_))) {
    EXPECT_EQ(s.options.kv.eviction_phase, 0);
  }
  limits_.spread_eviction_phase = true;
  r.kv_policy = "full";
  for (const PreparedRequest& s : ExpandSamples(*PrepareRequest(r, *rt_->tokenizer(), limits_))) {
    EXPECT_EQ(s.options.kv.eviction_phase, 0);
  }
}

TEST_F(PrepareRequestTest, ChatUsesTheTemplate) {
  ServeRequest r;
  r.input = ServeRequest::Input::kChat;
  r.messages = {{"system", "Be brief."}, {"user", "Hi"}};
  absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::string> rendered = rt_->tokenizer()->ApplyChatTemplate(r.messages, true);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(p->prompt, rt_->tokenizer()->Encode(*rendered, true, true));
}

TEST_F(PrepareRequestTest, BadInputsNameTheField) {
  ServeRequest none;
  ExpectInvalid(none, "input");
  ExpectInvalid(Text(""), "text");
  ExpectInvalid(Text("a\xC3\x28"), "text: is not valid UTF-8");
  ExpectInvalid(Text("\xED\xA0\x80"), "text");  // a UTF-16 surrogate
  ExpectInvalid(Text("\xC0\xAF"), "text");      // overlong
  ServeRequest chat;
  chat.input = ServeRequest::Input::kChat;
  ExpectInvalid(chat, "messages");
  chat.messages = {{"user", "ok"}, {"wizard", "hi"}};
  ExpectInvalid(chat, "messages[1].role");
  chat.messages = {{"user", "bad \xFF byte"}};
  ExpectInvalid(chat, "messages[0].content");
  ServeRequest toks;
  toks.input = ServeRequest::Input::kTokens;
  ExpectInvalid(toks, "tokens");
  toks.token_ids = {5, rt_->tokenizer()->vocab_size()};
  ExpectInvalid(toks, "tokens[1]");

  std::string long_text;
  for (int i = 0; i < limits_.context_length; ++i) long_text += " a";
  ExpectInvalid(Text(long_text), "prompt");

  ServeRequest r = Text("hi");
  r.max_tokens = -2;
  ExpectInvalid(r, "max_tokens");
  r.max_tokens = 5000;
  ExpectInvalid(r, "max_tokens");
  r = Text("hi");
  r.stop = {"ok", ""};
  ExpectInvalid(r, "stop[1]");
  r.stop = std::vector<std::string>(17, "x");
  ExpectInvalid(r, "stop");
  r.stop = {"\xFF"};
  ExpectInvalid(r, "stop[0]");
  r = Text("hi");
  r.stop_token_ids = {-1};
  ExpectInvalid(r, "stop_token_ids");
  r = Text("hi");
  r.temperature = -0.5f;
  ExpectInvalid(r, "temperature");
  r = Text("hi");
  r.top_p = 1.5f;
  ExpectInvalid(r, "top_p");
  r = Text("hi");
  r.kv_policy = "lru";
  ExpectInvalid(r, "lru");
  r = Text("hi");
  r.kv_budget = 8;
  ExpectInvalid(r, "kv_budget");
  r.kv_budget = 4096;
  ExpectInvalid(r, "kv_budget");
  r = Text("hi");
  r.request_id = std::string(300, 'x');
  ExpectInvalid(r, "request_id");
}

// Range errors show the value the client sent and the server's real limit.
TEST_F(PrepareRequestTest, RangeErrorsShowTheSentValueAndTheRealLimit) {
  ServeRequest r = Text("hi");
  r.max_tokens = int64_t{1} << 31;  // past int32: not wrapped, not clamped
  ExpectInvalid(r, "max_tokens: 2147483648 is outside [1, 4096]");
  limits_.max_tokens_limit = 0;  // then the context is the limit
  ExpectInvalid(r, absl::StrCat("max_tokens: 2147483648 is outside [1, ", limits_.context_length, "]"));
  // Past int64 (JSON only): the field saturates, the digits are shown.
  r.max_tokens = std::numeric_limits<int64_t>::max();
  r.oversized_ints["max_tokens"] = "18446744073709551615";
  ExpectInvalid(r, "max_tokens: 18446744073709551615 is outside [1, ");
  r = Text("hi");
  r.kv_budget = int64_t{1} << 40;
  ExpectInvalid(r, "kv_budget: 1099511627776 is outside the server's range [32, 2048]");
  r.kv_budget = -(int64_t{1} << 40);
  ExpectInvalid(r, "kv_budget: -1099511627776 is outside the server's range [32, 2048]");
}

TEST_F(PrepareRequestTest, RequestIdIsBoundedAndPrintable) {
  ServeRequest r = Text("hi");
  r.request_id = std::string(257, 'x');
  ExpectInvalid(r, "request_id: is 257 bytes; at most 256");
  r.request_id = std::string(256, 'x');
  EXPECT_TRUE(PrepareRequest(r, *rt_->tokenizer(), limits_).ok());
  r.request_id = "caf\xC3\xA9-\xE2\x82\xAC-1";  // printable UTF-8 is fine
  EXPECT_TRUE(PrepareRequest(r, *rt_->tokenizer(), limits_).ok());
  r.request_id = "a\nb";
  ExpectInvalid(r, "request_id: has the control character U+000A at byte 1");
  r.request_id = "ab\r";
  ExpectInvalid(r, "U+000D at byte 2");
  r.request_id = std::string("a\0b", 3);
  ExpectInvalid(r, "U+0000 at byte 1");
  r.request_id = "\x1b[31m";  // a terminal escape
  ExpectInvalid(r, "U+001B at byte 0");
  r.request_id = "del\x7f";
  ExpectInvalid(r, "U+007F at byte 3");
  r.request_id = "nel\xC2\x85";  // U+0085, a C1 line break
  ExpectInvalid(r, "U+0085 at byte 3");
  r.request_id = "bad\xFF";
  ExpectInvalid(r, "request_id: is not valid UTF-8");
  limits_.max_request_id_bytes = 8;
  r.request_id = "123456789";
  ExpectInvalid(r, "request_id: is 9 bytes; at most 8");
}

TEST_F(PrepareRequestTest, RepeatedFieldsAreBounded) {
  ServeRequest r = Text("hi");
  r.stop_token_ids = std::vector<int32_t>(65, 1);
  ExpectInvalid(r, "stop_token_ids: has 65 ids; at most 64");
  r.stop_token_ids = std::vector<int32_t>(64, 1);
  EXPECT_TRUE(PrepareRequest(r, *rt_->tokenizer(), limits_).ok());
  r = Text("hi");
  r.stop = std::vector<std::string>(17, "x");
  ExpectInvalid(r, "stop: has 17 strings; at most 16");
  r.stop = {std::string(257, 'x')};
  ExpectInvalid(r, "stop[0]: is 257 bytes; at most 256");

  ServeRequest chat;
  chat.input = ServeRequest::Input::kChat;
  chat.messages = std::vector<ChatMessage>(4097, ChatMessage{"user", "hi"});
  ExpectInvalid(chat, "messages: has 4097 messages; at most 4096");
  limits_.max_messages = 2;
  chat.messages.resize(3);
  ExpectInvalid(chat, "messages: has 3 messages; at most 2");
  // The Tokenize RPC's path checks the count too.
  absl::StatusOr<std::vector<int32_t>> ids = TokenizeInput(chat, *rt_->tokenizer(), limits_);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("at most 2"));

  // Token ids: a list past the context is refused before each id is checked.
  ServeRequest toks;
  toks.input = ServeRequest::Input::kTokens;
  toks.token_ids = std::vector<int32_t>(limits_.context_length, -1);
  ExpectInvalid(toks, absl::StrCat("prompt: is ", limits_.context_length, " tokens"));
}

TEST_F(PrepareRequestTest, OperatorCanForbidPolicies) {
  limits_.kv_limits.allowed_policies = {KvPolicyKind::kBeacon, KvPolicyKind::kSnapKv};
  limits_.kv_limits.allow_full = false;
  ServeRequest r = Text("hi");
  r.kv_policy = "full";
  ExpectInvalid(r, "kv_policy");
  r.kv_policy = "snapkv";
  absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.kv.policy, KvPolicyKind::kSnapKv);
  EXPECT_EQ(p->options.kv.budget, 256);  // the operator's budget
}

// cache_salt and the API key's tenant pick the prefix-cache partition:
// none of either is the shared one; any difference is another partition.
TEST_F(PrepareRequestTest, CacheSaltAndTenantPickThePartition) {
  auto partition = [&](std::optional<std::string> salt, uint64_t tenant) {
    ServeRequest r = Text("hi");
    r.cache_salt = std::move(salt);
    r.tenant = tenant;
    absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? p->cache_partition : kSharedPartition;
  };
  EXPECT_EQ(partition(std::nullopt, 0), kSharedPartition);
  const uint64_t a = partition("tenant-a", 0);
  EXPECT_NE(a, kSharedPartition);
  EXPECT_EQ(partition("tenant-a", 0), a);  // the same salt: the same partition
  EXPECT_NE(partition("tenant-b", 0), a);
  const uint64_t key7 = partition(std::nullopt, 7);
  EXPECT_NE(key7, kSharedPartition);
  EXPECT_NE(key7, a);
  EXPECT_NE(partition("tenant-a", 7), a);  // the key splits a salt's share
  EXPECT_NE(partition("tenant-a", 7), key7);
  EXPECT_NE(partition("tenant-a", 7), partition("tenant-a", 8));

  ServeRequest r = Text("hi");
  r.cache_salt = "";
  ExpectInvalid(r, "cache_salt");
  r.cache_salt = std::string(static_cast<size_t>(limits_.max_cache_salt_bytes) + 1, 's');
  ExpectInvalid(r, "cache_salt");
  r.cache_salt = std::string(static_cast<size_t>(limits_.min_cache_salt_bytes) - 1, 's');  // guessable
  ExpectInvalid(r, "cache_salt");
  r.cache_salt = std::string(static_cast<size_t>(limits_.min_cache_salt_bytes), 's');
  EXPECT_TRUE(PrepareRequest(r, *rt_->tokenizer(), limits_).ok());
}

// The salt enters as its SHA-256 (FIPS 180-2's test vectors, first 8 bytes).
TEST(CacheSaltDigestTest, IsTheFirstEightBytesOfSha256) {
  EXPECT_EQ(CacheSaltDigest("abc"), 0xba7816bf8f01cfeaULL);
  EXPECT_EQ(CacheSaltDigest(""), 0xe3b0c44298fc1c14ULL);
  EXPECT_EQ(CacheSaltDigest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"), 0x248d6a61d20638b8ULL);
}

// cached_tokens leaks other clients' recent prompts on the shared cache, so
// it is reported only with --enable-prompt-tokens-details or in a request's
// own partition (issue 46).
TEST_F(PrepareRequestTest, CachedTokensReportedOnlyInOwnPartitionOrWhenEnabled) {
  auto reported = [&](std::optional<std::string> salt, uint64_t tenant, bool enabled) {
    ServeRequest r = Text("hi");
    r.cache_salt = std::move(salt);
    r.tenant = tenant;
    ServeLimits limits = limits_;
    limits.enable_prompt_tokens_details = enabled;
    absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() && p->report_cached_tokens;
  };
  EXPECT_FALSE(reported(std::nullopt, 0, false));  // the shared cache: withheld
  EXPECT_TRUE(reported(std::nullopt, 0, true));
  EXPECT_TRUE(reported("tenant-a", 0, false));  // its own partition
  EXPECT_TRUE(reported(std::nullopt, 7, false));
}

TEST(Utf8Test, ExcerptBoundsAClientString) {
  EXPECT_EQ(Excerpt("short"), "short");
  const std::string big(1 << 20, 'x');
  EXPECT_EQ(Excerpt(big), std::string(64, 'x') + "... (1048576 bytes)");
  // Never a cut character: the 3-byte euro sign straddling byte 64 is left out whole.
  const std::string euros = std::string(63, 'a') + "\xE2\x82\xAC\xE2\x82\xAC";
  const std::string e = Excerpt(euros);
  EXPECT_TRUE(IsValidUtf8(e)) << e;
  EXPECT_EQ(e.substr(0, 63), std::string(63, 'a'));
  EXPECT_EQ(e.substr(63, 4), "... ");
}

// A refusal quotes a client's string only in part, so its log line is bounded.
TEST_F(PrepareRequestTest, RefusalsQuoteClientStringsInPart) {
  ServeRequest r;
  r.input = ServeRequest::Input::kChat;
  r.messages = {ChatMessage{std::string(1 << 20, 'r'), "hi"}};
  absl::StatusOr<PreparedRequest> p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_FALSE(p.ok());
  EXPECT_LT(p.status().message().size(), 300u) << p.status().message().substr(0, 300);
  EXPECT_NE(p.status().message().find("(1048576 bytes)"), std::string::npos);
  r = Text("hi");
  r.kv_policy = std::string(1 << 20, 'p');
  p = PrepareRequest(r, *rt_->tokenizer(), limits_);
  ASSERT_FALSE(p.ok());
  EXPECT_LT(p.status().message().size(), 300u);
}

TEST(Utf8Test, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\x80"));
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong
}

}  // namespace
}  // namespace beacon
