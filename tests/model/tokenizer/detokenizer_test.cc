// IncrementalDetokenizer: characters split across tokens are held back,
// broken bytes become U+FFFD, and the stream adds up to the whole decode.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "tests/model/tokenizer/tokenizer_test_util.h"

namespace beacon {
namespace {

using testing::ByteLevel;
using testing::ToyData;

constexpr char kFffd[] = "\xEF\xBF\xBD";

class DetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Multi-byte tokens that end or start in the middle of a character:
    // "\xE4\xB8" (2 of 中's 3 bytes), "\xF0\x9F" and "\x99\x82" (halves of 🙂),
    // "\xAD!" (中's last byte and '!').
    auto t =
        Tokenizer::Create(ToyData({{"\xE4", "\xB8"}, {"\xF0", "\x9F"}, {"\x99", "\x82"}, {"\xAD", "!"}}, {"<|ctl|>"}));
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = *std::move(t);
  }
  int32_t Id(std::string_view raw) const { return tok_->TokenId(ByteLevel(raw)); }

  // Pushes every id and returns the deltas, the flush last.
  std::vector<std::string> Stream(const std::vector<int32_t>& ids, bool render_special = false) const {
    IncrementalDetokenizer d(tok_.get(), render_special);
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(d.Push(id));
    out.push_back(d.Flush());
    return out;
  }

  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(DetokenizerTest, CjkSplitAcrossTokens) {
  EXPECT_EQ(Stream({'a', Id("\xE4\xB8"), Id("\xAD!"), 'b'}),
            (std::vector<std::string>{"a", "", "\xE4\xB8\xAD!", "b", ""}));
  EXPECT_EQ(Stream({0xE4, 0xB8, 0xAD}), (std::vector<std::string>{"", "", "\xE4\xB8\xAD", ""}));
}

TEST_F(DetokenizerTest, EmojiSplitInHalves) {
  EXPECT_EQ(Stream({Id("\xF0\x9F"), Id("\x99\x82"), ' '}), (std::vector<std::string>{"", "\xF0\x9F\x99\x82", " ", ""}));
}

TEST_F(DetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  // 0xFF can never start a character: replaced at once.
  EXPECT_EQ(Stream({'a', 0xFF, 'b'}), (std::vector<std::string>{"a", kFffd, "b", ""}));
  // A lone continuation byte likewise.
  EXPECT_EQ(Stream({0x80}), (std::vector<std::string>{kFffd, ""}));
  // An incomplete character followed by ASCII: replaced once the ASCII shows
  // it cannot complete.
  EXPECT_EQ(Stream({Id("\xE4\xB8"), 'x'}), (std::vector<std::string>{"", std::string(kFffd) + "x", ""}));
  // Still incomplete at the end: Flush replaces it.
  EXPECT_EQ(Stream({Id("\xF0\x9F"), 0x99}), (std::vector<std::string>{"", "", kFffd}));
  // Bytes that would encode a surrogate are rejected, not emitted raw.
  EXPECT_EQ(Stream({0xED, 0xA0, 0x80}), (std::vector<std::string>{"", std::string(kFffd) + kFffd, kFffd, ""}));
}

TEST_F(DetokenizerTest, ControlTokensRenderOnlyWhenAsked) {
  const int32_t ctl = tok_->TokenId("<|ctl|>");
  EXPECT_EQ(Stream({'a', ctl, 'b'}), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(Stream({'a', ctl, 'b'}, true), (std::vector<std::string>{"a", "<|ctl|>", "b", ""}));
  // A hidden control token does not break a character being assembled...
  EXPECT_EQ(Stream({Id("\xE4\xB8"), ctl, 0xAD}), (std::vector<std::string>{"", "", "\xE4\xB8\xAD", ""}));
  // ...a rendered one does.
  EXPECT_EQ(Stream({Id("\xE4\xB8"), ctl, 0xAD}, true),
            (std::vector<std::string>{"", std::string(kFffd) + "<|ctl|>", kFffd, ""}));
}

TEST_F(DetokenizerTest, StreamEqualsSanitizedWholeDecode) {
  // Every delta is valid UTF-8 and together they are the sanitized decode,
  // for a byte soup that mixes valid, split and broken characters.
  std::vector<int32_t> ids;
  const std::string soup = "ok \xE4\xB8\xAD\xF0\x9F\x99\x82\xFF\xE4\xB8 x\xC3\xA9\xC3";
  for (unsigned char c : soup) ids.push_back(c);
  std::string joined;
  for (const std::string& delta : Stream(ids)) {
    EXPECT_EQ(SanitizeUtf8(delta), delta);
    joined += delta;
  }
  EXPECT_EQ(joined, SanitizeUtf8(tok_->Decode(ids)));
  EXPECT_EQ(joined, "ok \xE4\xB8\xAD\xF0\x9F\x99\x82" + std::string(kFffd) + kFffd + " x\xC3\xA9" + kFffd);
}

}  // namespace
}  // namespace beacon
