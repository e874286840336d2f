#include "model/tokenizer/pretokenizer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Words = std::vector<std::string>;

Words SplitWith(std::string_view pre, std::string_view text) {
  absl::StatusOr<PreTokenizerInfo> info = LookupPreTokenizer(pre);
  EXPECT_TRUE(info.ok()) << info.status();
  Words words;
  PreTokenizer(info->kind).Split(text, &words);
  return words;
}

TEST(PreTokenizerLookup, KnownNamesAndFamilies) {
  EXPECT_EQ(LookupPreTokenizer("smollm")->kind, PreTokenizerKind::kStarCoder);
  EXPECT_EQ(LookupPreTokenizer("gpt2")->kind, PreTokenizerKind::kGpt2);
  EXPECT_EQ(LookupPreTokenizer("default")->kind, PreTokenizerKind::kDefault);
  EXPECT_EQ(LookupPreTokenizer("llama-bpe")->kind, PreTokenizerKind::kLlama3);
  EXPECT_TRUE(LookupPreTokenizer("llama3")->ignore_merges);
  EXPECT_EQ(LookupPreTokenizer("qwen2")->kind, PreTokenizerKind::kQwen2);
  EXPECT_EQ(LookupPreTokenizer("deepseek-r1-qwen")->kind, PreTokenizerKind::kQwen2);
  EXPECT_FALSE(LookupPreTokenizer("qwen2")->ignore_merges);
}

TEST(PreTokenizerLookup, UnknownNameIsInvalidArgumentListingSupported) {
  absl::StatusOr<PreTokenizerInfo> info = LookupPreTokenizer("klingon");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("'klingon'"));
  EXPECT_THAT(info.status().message(), HasSubstr("smollm"));
  EXPECT_THAT(info.status().message(), HasSubstr("qwen2"));
}

TEST(SmolLmSplit, WordsKeepTheirLeadingSpace) {
  EXPECT_THAT(SplitWith("smollm", "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(SplitWith("smollm", "Hello, world!"), ElementsAre("Hello", ",", " world", "!"));
}

TEST(SmolLmSplit, EveryDigitIsItsOwnWord) {
  // \p{N} runs first, so the space before a number is left alone.
  EXPECT_THAT(SplitWith("smollm", "abc 123"), ElementsAre("abc", " ", "1", "2", "3"));
  EXPECT_THAT(SplitWith("smollm", "x2y"), ElementsAre("x", "2", "y"));
  EXPECT_THAT(SplitWith("smollm", "٣½"), ElementsAre("٣", "½"));
}

TEST(SmolLmSplit, ContractionsAreLowercaseOnly) {
  EXPECT_THAT(SplitWith("smollm", "it's we'll"), ElementsAre("it", "'s", " we", "'ll"));
  EXPECT_THAT(SplitWith("smollm", "IT'S"), ElementsAre("IT", "'", "S"));
}

TEST(SmolLmSplit, WhitespaceRuns) {
  // \s+(?!\S): the last space of a run goes to the next word.
  EXPECT_THAT(SplitWith("smollm", "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(SplitWith("smollm", "a   "), ElementsAre("a", "   "));
  EXPECT_THAT(SplitWith("smollm", "x\n\ny"), ElementsAre("x", "\n", "\n", "y"));
  EXPECT_THAT(SplitWith("smollm", "\tfoo"), ElementsAre("\t", "foo"));
  EXPECT_THAT(SplitWith("smollm", " "), ElementsAre(" "));
  EXPECT_TRUE(SplitWith("smollm", "").empty());
}

TEST(Gpt2Split, UnicodeClasses) {
  EXPECT_THAT(SplitWith("gpt2", "café 東京"), ElementsAre("café", " 東京"));
  EXPECT_THAT(SplitWith("gpt2", "hi 🙂🙂!"), ElementsAre("hi", " 🙂🙂!"));
  EXPECT_THAT(SplitWith("gpt2", "abc 123"), ElementsAre("abc", " 123"));
  // A combining mark is neither letter nor number.
  EXPECT_THAT(SplitWith("gpt2", "e\u0301x"), ElementsAre("e", "\u0301", "x"));
}

TEST(Gpt2Split, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_THAT(SplitWith("gpt2",
                        "a\xFF"
                        "b"),
              ElementsAre("a", "\xEF\xBF\xBD", "b"));
}

TEST(Llama3Split, NumbersInGroupsOfThree) {
  EXPECT_THAT(SplitWith("llama-bpe", "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(SplitWith("llama-bpe", "x 1234567"), ElementsAre("x", " ", "123", "456", "7"));
}

TEST(Llama3Split, LettersTakeOneLeadingNonLetter) {
  EXPECT_THAT(SplitWith("llama-bpe", "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(SplitWith("llama-bpe", "!hi (x)"), ElementsAre("!hi", " (", "x", ")"));
  EXPECT_THAT(SplitWith("llama-bpe", "\tabc"), ElementsAre("\tabc"));
  EXPECT_THAT(SplitWith("llama-bpe", "  hi"), ElementsAre(" ", " hi"));
}

TEST(Llama3Split, ContractionsIgnoreCase) {
  EXPECT_THAT(SplitWith("llama-bpe", "IT'S it's"), ElementsAre("IT", "'S", " it", "'s"));
}

TEST(Llama3Split, NewlinesEndWhitespaceRuns) {
  EXPECT_THAT(SplitWith("llama-bpe", "a\n\nb"), ElementsAre("a", "\n\n", "b"));
  EXPECT_THAT(SplitWith("llama-bpe", " \n x"), ElementsAre(" \n", " x"));
  EXPECT_THAT(SplitWith("llama-bpe", "a...\n\nb"), ElementsAre("a", "...\n\n", "b"));
  EXPECT_THAT(SplitWith("llama-bpe", "x  "), ElementsAre("x", "  "));
}

TEST(Qwen2Split, SingleDigits) {
  EXPECT_THAT(SplitWith("qwen2", "12345"), ElementsAre("1", "2", "3", "4", "5"));
  EXPECT_THAT(SplitWith("qwen2", "Hello world's"), ElementsAre("Hello", " world", "'s"));
}

TEST(DefaultSplit, PunctuationFirstThenGpt2ThenDigits) {
  EXPECT_THAT(SplitWith("default", "a+b=c"), ElementsAre("a", "+", "b", "=", "c"));
  EXPECT_THAT(SplitWith("default", "hello, world"), ElementsAre("hello", ",", " world"));
  EXPECT_THAT(SplitWith("default", "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(SplitWith("default", "a `b`"), ElementsAre("a", " `", "b", "`"));
}

TEST(PreTokenizer, SpansCoverTheInput) {
  const std::vector<uint32_t> cps = {'a', ' ', 'b', '1', '2', ' ', ' ', '!', 0x4E2D};
  for (PreTokenizerKind kind : {PreTokenizerKind::kDefault, PreTokenizerKind::kGpt2, PreTokenizerKind::kStarCoder,
                                PreTokenizerKind::kLlama3, PreTokenizerKind::kQwen2}) {
    uint32_t next = 0;
    for (const CodepointSpan& s : PreTokenizer(kind).SplitCodepoints(cps)) {
      EXPECT_EQ(s.begin, next);
      EXPECT_LT(s.begin, s.end);
      next = s.end;
    }
    EXPECT_EQ(next, cps.size());
  }
}

}  // namespace
}  // namespace beacon
