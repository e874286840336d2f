// Tokenizer::Create, Encode and Decode on toy vocabularies built here.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/model/tokenizer/tokenizer_test_util.h"

namespace beacon {
namespace {

using testing::ByteLevel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ToyData;

std::unique_ptr<Tokenizer> Make(TokenizerData data) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(std::move(data));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

int32_t Id(const Tokenizer& t, std::string_view raw) { return t.TokenId(ByteLevel(raw)); }

TEST(BpeMerges, MergesChainIntoOneToken) {
  auto t = Make(ToyData({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}));
  EXPECT_THAT(t->Encode("hello", false, false), ElementsAre(Id(*t, "hello")));
  // Without the last merge's right part, the chain stops early.
  EXPECT_THAT(t->Encode("hellx", false, false), ElementsAre(Id(*t, "hell"), 'x'));
}

TEST(BpeMerges, LowerRankWinsOverPosition) {
  // "b c" has rank 0 and "a b" rank 1: in "abc", bc merges first and then
  // "a bc" has no merge.
  auto t = Make(ToyData({{"b", "c"}, {"a", "b"}}));
  EXPECT_THAT(t->Encode("abc", false, false), ElementsAre('a', Id(*t, "bc")));
  auto u = Make(ToyData({{"a", "b"}, {"b", "c"}}));
  EXPECT_THAT(u->Encode("abc", false, false), ElementsAre(Id(*u, "ab"), 'c'));
}

TEST(BpeMerges, EqualRanksMergeLeftmostFirst) {
  auto t = Make(ToyData({{"a", "a"}}));
  EXPECT_THAT(t->Encode("aaa", false, false), ElementsAre(Id(*t, "aa"), 'a'));
  auto u = Make(ToyData({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_THAT(u->Encode("aaaaa", false, false), ElementsAre(Id(*u, "aaaa"), 'a'));
}

TEST(BpeMerges, NeverAcrossPreTokenizerWords) {
  // "a Ġ" would glue the space to the left word; the split puts it on the right.
  auto t = Make(ToyData({{"a", " "}, {" ", "b"}}));
  EXPECT_THAT(t->Encode("a b", false, false), ElementsAre('a', Id(*t, " b")));
}

TEST(BpeMerges, ByteMissingFromVocabularyIsDropped) {
  // llama.cpp drops a byte whose byte-level character is not a token.
  TokenizerData d = ToyData({});
  d.tokens[4] = "<unused-4>";  // byte 0x04's character "Ą" no longer in the vocabulary
  auto t = Make(std::move(d));
  EXPECT_THAT(t->Encode("\x04x", false, false), ElementsAre('x'));
}

TEST(BpeMerges, IgnoreMergesEmitsWholeWordTokens) {
  // " hello" is a token that no merge reaches.
  TokenizerData d = ToyData({}, {}, {}, "llama-bpe");
  d.tokens.push_back(ByteLevel(" hello"));
  d.token_types.push_back(TokenType::kNormal);
  const int32_t whole = static_cast<int32_t>(d.tokens.size()) - 1;
  TokenizerData q = d;
  q.pre = "qwen2";
  EXPECT_THAT(Make(std::move(d))->Encode(" hello", false, false), ElementsAre(whole));
  EXPECT_THAT(Make(std::move(q))->Encode(" hello", false, false), ElementsAre(' ', 'h', 'e', 'l', 'l', 'o'));
}

TEST(SpecialTokens, MatchedOnlyWithParseSpecial) {
  auto t = Make(ToyData({}, {"<|s|>"}));
  const int32_t s = t->TokenId("<|s|>");
  EXPECT_THAT(t->Encode("a<|s|>b", true, false), ElementsAre('a', s, 'b'));
  EXPECT_THAT(t->Encode("a<|s|>b", false, false), ElementsAre('a', '<', '|', 's', '|', '>', 'b'));
  EXPECT_THAT(t->Encode("<|s|><|s|>", true, false), ElementsAre(s, s));
}

TEST(SpecialTokens, LongestTextFirst) {
  auto t = Make(ToyData({}, {"<s>", "<s>x"}));
  EXPECT_THAT(t->Encode("<s>xy<s>", true, false), ElementsAre(t->TokenId("<s>x"), 'y', t->TokenId("<s>")));
}

TEST(SpecialTokens, UserDefinedAreAlwaysMatched) {
  // Added (non-special) tokens are matched even without parse_special, as in
  // llama.cpp and HF tokenizers; they also always render.
  auto t = Make(ToyData({}, {}, {"<think>"}));
  const int32_t think = t->TokenId("<think>");
  EXPECT_THAT(t->Encode("a<think>b", false, false), ElementsAre('a', think, 'b'));
  EXPECT_EQ(t->TokenBytes(think), "<think>");
  EXPECT_FALSE(t->IsSpecial(think));
}

TEST(Encode, AddBosOnlyWhenTheVocabularyAsks) {
  TokenizerData d = ToyData({}, {"<bos>"});
  d.bos_id = static_cast<int32_t>(d.tokens.size()) - 1;
  TokenizerData no_bos = d;
  d.add_bos = true;
  auto t = Make(std::move(d));
  EXPECT_THAT(t->Encode("a", false, true), ElementsAre(t->bos_id(), 'a'));
  EXPECT_THAT(t->Encode("a", false, false), ElementsAre('a'));
  EXPECT_THAT(Make(std::move(no_bos))->Encode("a", false, true), ElementsAre('a'));
}

TEST(Decode, UndoesByteLevelAndHidesControlTokens) {
  auto t = Make(ToyData({{" ", "h"}, {" h", "i"}}, {"<|end|>"}));
  const std::string text = "  hi\tthere\r\n\xE4\xB8\xAD\xF0\x9F\x99\x82 \x01\x7F";
  EXPECT_EQ(t->Decode(t->Encode(text, false, false)), text);
  // Invalid input bytes were read as U+FFFD (as llama.cpp reads them).
  EXPECT_EQ(t->Decode(t->Encode("a\xFF", false, false)), "a\xEF\xBF\xBD");
  const int32_t end = t->TokenId("<|end|>");
  EXPECT_TRUE(t->IsSpecial(end));
  EXPECT_EQ(t->TokenBytes(end), "");
  EXPECT_EQ(t->TokenBytes(end, /*render_special=*/true), "<|end|>");
  EXPECT_EQ(t->Decode({'a', end, 'b'}), "ab");
  EXPECT_EQ(t->Decode({'a', end, 'b'}, true), "a<|end|>b");
  EXPECT_EQ(t->TokenBytes(' '), " ");
  EXPECT_EQ(t->TokenBytes(-1), "");
}

TEST(Decode, ByteTypeTokens) {
  TokenizerData d = ToyData({});
  d.tokens.push_back("<0x41>");
  d.token_types.push_back(TokenType::kByte);
  auto t = Make(std::move(d));
  EXPECT_EQ(t->TokenBytes(t->vocab_size() - 1), "A");
}

TEST(EndOfGeneration, EosExtrasAndKnownEndOfTurnTexts) {
  TokenizerData d = ToyData({}, {"<|endoftext|>", "<|im_end|>", "<|x|>", "<|y|>"});
  d.eos_id = 256;
  d.extra_eos_ids = {258};
  auto t = Make(std::move(d));
  EXPECT_TRUE(t->IsEndOfGeneration(256));
  EXPECT_TRUE(t->IsEndOfGeneration(257));  // <|im_end|> by its text
  EXPECT_TRUE(t->IsEndOfGeneration(258));
  EXPECT_FALSE(t->IsEndOfGeneration(259));
  EXPECT_FALSE(t->IsEndOfGeneration('a'));
  EXPECT_EQ(t->eos_id(), 256);
}

TEST(ChatTemplateThroughTokenizer, BosMarkerOnlyWhenEncodeWillNotAddIt) {
  TokenizerData d = ToyData({}, {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  d.bos_id = 256;
  // Llama 3.0's template.
  d.chat_template =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
      "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
      "{% endif %}";
  TokenizerData adds = d;
  adds.add_bos = true;
  const std::vector<ChatMessage> messages = {{"user", " hi "}};
  const std::string body = "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>";
  EXPECT_EQ(*Make(std::move(d))->ApplyChatTemplate(messages, false), "<|begin_of_text|>" + body);
  auto t = Make(std::move(adds));
  EXPECT_EQ(*t->ApplyChatTemplate(messages, false), body);
  // One BOS either way once encoded with add_bos.
  EXPECT_EQ(t->Encode(*t->ApplyChatTemplate(messages, false), true, true).front(), 256);
  EXPECT_EQ(t->Encode(*t->ApplyChatTemplate(messages, false), true, true)[1], 257);
}

// Any template renders; one that does not parse is refused when the
// tokenizer is made (a start-up error naming the line), not per request.
TEST(ChatTemplateThroughTokenizer, AnyTemplateRendersAndABrokenOneIsAStartUpError) {
  TokenizerData d = ToyData({});
  d.chat_template = "{% for m in messages %}[[{{ m.role }}]] {{ m.content }}{% endfor %}";
  EXPECT_EQ(*Make(std::move(d))->ApplyChatTemplate({{"user", "x"}}, true), "[[user]] x");
  TokenizerData broken = ToyData({});
  broken.chat_template = "{% for m in messages %}[[{{ m.role }}]]";
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(std::move(broken));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("chat template: template line 1"));
}

// Extra variables reach the template; an assistant turn's reasoning_content
// is a message field only when given.
TEST(ChatTemplateThroughTokenizer, ExtraVariablesAndReasoningContent) {
  TokenizerData d = ToyData({});
  d.chat_template =
      "{% for m in messages %}{{ m.role }}:{{ m.reasoning_content if m.reasoning_content is defined else '-' }}:"
      "{{ m.content }};{% endfor %}{{ 'think' if enable_thinking is defined and enable_thinking else 'plain' }}";
  auto t = Make(std::move(d));
  std::vector<ChatMessage> msgs = {{"user", "q"}, {"assistant", "a", "r"}};
  EXPECT_EQ(*t->ApplyChatTemplate(msgs, true), "user:-:q;assistant:r:a;plain");
  EXPECT_EQ(*t->ApplyChatTemplate(msgs, true, jinja::Json{{"enable_thinking", true}}), "user:-:q;assistant:r:a;think");
  EXPECT_EQ(t->chat_template_source().substr(0, 6), "{% for");
}

void ExpectInvalid(TokenizerData d, std::string_view fragment) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(std::move(d));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr(std::string(fragment)));
}

TEST(BadData, UnknownPreTokenizer) {
  TokenizerData d = ToyData({});
  d.pre = "mystery-pre";
  ExpectInvalid(d, "'mystery-pre'");
  ExpectInvalid(d, "smollm");  // lists what is supported
}

TEST(BadData, NotByteLevelBpe) {
  TokenizerData d = ToyData({});
  d.model = "llama";
  ExpectInvalid(d, "'llama'");
}

TEST(BadData, MergeWithUnknownToken) {
  TokenizerData d = ToyData({});
  d.merges.push_back("a zz");
  ExpectInvalid(d, "'zz'");
  TokenizerData e = ToyData({});
  e.merges.push_back("a b");  // "ab" itself is not a token
  ExpectInvalid(e, "'ab'");
}

TEST(BadData, MalformedMerge) {
  TokenizerData d = ToyData({});
  d.merges.push_back("ab");
  ExpectInvalid(d, "merge 0");
}

TEST(BadData, DuplicateTokensIdsAndTypes) {
  TokenizerData dup = ToyData({});
  dup.tokens.push_back("a");
  dup.token_types.push_back(TokenType::kNormal);
  ExpectInvalid(dup, "appears twice");
  TokenizerData bos = ToyData({});
  bos.bos_id = 100000;
  ExpectInvalid(bos, "bos_id");
  TokenizerData types = ToyData({});
  types.token_types.pop_back();
  ExpectInvalid(types, "token types");
  TokenizerData empty;
  ExpectInvalid(empty, "empty");
  TokenizerData add_bos = ToyData({});
  add_bos.add_bos = true;
  ExpectInvalid(add_bos, "bos");
}

}  // namespace
}  // namespace beacon
