#include "model/tokenizer/unicode.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/byte_level.h"

namespace beacon {
namespace {

TEST(UnicodeFlags, CategoriesOfSampleCodepoints) {
  EXPECT_EQ(CodepointFlags('a') & kCpCategoryMask, kCpLetter);
  EXPECT_EQ(CodepointFlags('Z') & kCpCategoryMask, kCpLetter);
  EXPECT_EQ(CodepointFlags('7') & kCpCategoryMask, kCpNumber);
  EXPECT_EQ(CodepointFlags('!') & kCpCategoryMask, kCpPunctuation);
  EXPECT_EQ(CodepointFlags('$') & kCpCategoryMask, kCpSymbol);
  EXPECT_EQ(CodepointFlags('`') & kCpCategoryMask, kCpSymbol);
  EXPECT_EQ(CodepointFlags(0xE9) & kCpCategoryMask, kCpLetter);     // é
  EXPECT_EQ(CodepointFlags(0x4E2D) & kCpCategoryMask, kCpLetter);   // 中
  EXPECT_EQ(CodepointFlags(0xAC00) & kCpCategoryMask, kCpLetter);   // 가
  EXPECT_EQ(CodepointFlags(0x0663) & kCpCategoryMask, kCpNumber);   // Arabic-Indic 3
  EXPECT_EQ(CodepointFlags(0x00BD) & kCpCategoryMask, kCpNumber);   // ½ (No)
  EXPECT_EQ(CodepointFlags(0x216B) & kCpCategoryMask, kCpNumber);   // Ⅻ (Nl)
  EXPECT_EQ(CodepointFlags(0x0301) & kCpCategoryMask, kCpMark);     // combining acute
  EXPECT_EQ(CodepointFlags(0x1F642) & kCpCategoryMask, kCpSymbol);  // 🙂
  EXPECT_EQ(CodepointFlags(0x200D) & kCpCategoryMask, kCpControl);  // ZWJ (Cf)
  EXPECT_EQ(CodepointFlags(0xE000) & kCpCategoryMask, kCpControl);  // private use
  EXPECT_EQ(CodepointFlags(0x0378) & kCpCategoryMask, kCpUndefined);
  EXPECT_EQ(CodepointFlags(0x110000), kCpUndefined);
}

TEST(UnicodeFlags, WhitespaceIsTheWhiteSpaceProperty) {
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(IsWhitespace(CodepointFlags(cp))) << std::hex << cp;
  }
  // str.isspace() says yes to these; White_Space (and llama.cpp) says no.
  for (uint32_t cp : {0x1Cu, 0x1Du, 0x1Eu, 0x1Fu, 0x200Bu, 0x180Eu, 0x61u}) {
    EXPECT_FALSE(IsWhitespace(CodepointFlags(cp))) << std::hex << cp;
  }
  EXPECT_EQ(CodepointFlags(' ') & kCpCategoryMask, kCpSeparator);
  EXPECT_EQ(CodepointFlags('\n') & kCpCategoryMask, kCpControl);
}

TEST(Utf8, LenientDecodeFollowsLlamaCpp) {
  EXPECT_EQ(DecodeUtf8Lenient("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x99\x82"),
            (std::vector<uint32_t>{'a', 0xE9, 0x4E2D, 0x1F642}));
  // A stray byte is one U+FFFD; decoding resumes at the next byte.
  EXPECT_EQ(DecodeUtf8Lenient("a\xFF"
                              "b"),
            (std::vector<uint32_t>{'a', 0xFFFD, 'b'}));
  // A truncated sequence: the lead and each continuation byte become U+FFFD.
  EXPECT_EQ(DecodeUtf8Lenient("\xE4\xB8"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  // Overlong forms are accepted as llama.cpp accepts them.
  EXPECT_EQ(DecodeUtf8Lenient("\xC0\x80"), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(DecodeUtf8Lenient("").empty());
}

TEST(Utf8, EncodeRoundTrips) {
  for (uint32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    EXPECT_EQ(DecodeUtf8Lenient(EncodeUtf8(cp)), std::vector<uint32_t>{cp}) << std::hex << cp;
  }
  EXPECT_EQ(EncodeUtf8(0x110000), "\xEF\xBF\xBD");
}

TEST(Utf8, CompletePrefixHoldsOnlyCompletableTails) {
  EXPECT_EQ(Utf8CompletePrefix("abc"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xE4\xB8"), 2u);      // 中 missing its last byte
  EXPECT_EQ(Utf8CompletePrefix("ab\xF0\x9F\x99"), 2u);  // emoji missing one byte
  EXPECT_EQ(Utf8CompletePrefix("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xFF"), 3u);  // can never complete
  EXPECT_EQ(Utf8CompletePrefix("ab\xE4"
                               "c"),
            4u);                                  // broken already
  EXPECT_EQ(Utf8CompletePrefix("\xED\xA0"), 2u);  // would be a surrogate
}

TEST(Utf8, SanitizeReplacesMaximalSubparts) {
  EXPECT_EQ(SanitizeUtf8("ok \xE4\xB8\xAD"), "ok \xE4\xB8\xAD");
  EXPECT_EQ(SanitizeUtf8("\xE4\xB8x"), "\xEF\xBF\xBDx");  // one U+FFFD
  EXPECT_EQ(SanitizeUtf8("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x99"), "\xEF\xBF\xBD");                          // truncated at end
}

TEST(ByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(ByteToCodepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(ByteToCodepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ByteToCodepoint('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(ByteToCodepoint(0xAD), 0x143u);  // the last of the 68 remapped bytes
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ByteFromCodepoint(ByteToCodepoint(b)), b);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string encoded;
  AppendByteLevel(all, &encoded);
  EXPECT_EQ(DecodeByteLevel(encoded), all);
  EXPECT_EQ(DecodeByteLevel("\xC4\xA0hello"), " hello");
}

}  // namespace
}  // namespace beacon
