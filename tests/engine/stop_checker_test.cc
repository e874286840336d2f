#include "engine/stop_checker.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

// Splits UTF-8 text into one string per code point.
std::vector<std::string> CodePoints(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool continuation = (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
    if (continuation && !out.empty()) {
      out.back().push_back(text[i]);
    } else {
      out.emplace_back(1, text[i]);
    }
  }
  return out;
}

// Minimal structural UTF-8 check: lead bytes followed by the right number of
// continuation bytes.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

struct Outcome {
  std::string text;  // everything emitted, Flush() included when not stopped
  bool stopped = false;
};

Outcome RunChecker(const std::vector<std::string>& stops, const std::vector<std::string>& deltas) {
  StopChecker checker(stops);
  Outcome out;
  for (const std::string& d : deltas) {
    StopChecker::Result r = checker.Push(d);
    EXPECT_TRUE(IsValidUtf8(r.text)) << "emitted a broken character: " << r.text;
    out.text += r.text;
    if (r.stopped) {
      out.stopped = true;
      // Once stopped, nothing more is emitted.
      StopChecker::Result after = checker.Push("more text");
      EXPECT_TRUE(after.stopped);
      EXPECT_EQ(after.text, "");
      EXPECT_EQ(checker.Flush(), "");
      return out;
    }
  }
  out.text += checker.Flush();
  return out;
}

struct Case {
  const char* name;
  std::vector<std::string> stops;
  std::string text;
  std::string expected;
  bool stopped;
};

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"stop_at_start", {"###"}, "###abc", "", true},
      {"stop_in_middle", {"STOP"}, "hello STOP world", "hello ", true},
      {"stop_at_end", {"</s>"}, "abc</s>", "abc", true},
      {"no_stop", {"xyz"}, "hello world", "hello world", false},
      {"no_stop_strings", {}, "hello", "hello", false},
      {"partial_then_mismatch", {"abcd"}, "xxabcXabcd", "xxabcX", true},
      {"partial_at_end_is_flushed", {"END"}, "the EN", "the EN", false},
      {"overlapping_self", {"aab"}, "aaab", "a", true},
      {"overlapping_period", {"abab"}, "abacababz", "abac", true},
      {"repeated_newlines", {"\n\n"}, "a\nb\n\nc", "a\nb", true},
      {"two_stops_first_in_text_wins", {"foo", "bar"}, "a bar foo", "a ", true},
      {"prefix_pair_short_listed_first", {"ab", "abc"}, "xabcd", "x", true},
      {"prefix_pair_long_listed_first", {"abc", "ab"}, "zabc", "z", true},
      // "b" completes before "abc" does, so the stream ends at "b".
      {"earliest_end_wins", {"abc", "b"}, "xabc", "xa", true},
      // Both end at the same byte: cut at the earlier start (the longer one).
      {"same_end_longer_wins", {"c", "abc"}, "xabcd", "x", true},
      {"empty_stop_ignored", {"", "x"}, "abc", "abc", false},
      {"only_empty_stop", {""}, "abc", "abc", false},
      {"unicode_cjk", {"。"}, "你好。世界", "你好", true},
      {"unicode_emoji", {"🛑"}, "go 🛑 stop", "go ", true},
      {"unicode_shared_first_char", {"世界"}, "世纪世界", "世纪", true},
      {"unicode_shared_lead_bytes", {"€"}, "₀₁₂", "₀₁₂", false},
      {"unicode_multi_char_prefix", {"é!"}, "éa é!", "éa ", true},
      // A (malformed) stop string that begins with a continuation byte must
      // not match inside a character: cuts happen at character starts only.
      {"no_match_inside_a_character", {"\x82\xAC", "\x82\xAC!"}, "a€b", "a€b", false},
      {"stop_equals_whole_text", {"done"}, "done", "", true},
      {"stop_longer_than_text", {"<|im_end|>"}, "<|im_", "<|im_", false},
  };
  return *cases;
}

TEST(StopCheckerTest, ReportsWhichStopMatched) {
  StopChecker none({"END", "stop"});
  EXPECT_EQ(none.matched(), "");
  StopChecker c({"END", "the e", "zzz"});
  StopChecker::Result r = c.Push("see the");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(c.matched(), "");
  r = c.Push(" end END");  // "the e" ends before "END"
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(c.matched(), "the e");
}

TEST(StopCheckerTest, WholeTextInOneDelta) {
  for (const Case& c : Cases()) {
    const Outcome o = RunChecker(c.stops, {c.text});
    EXPECT_EQ(o.text, c.expected) << c.name;
    EXPECT_EQ(o.stopped, c.stopped) << c.name;
  }
}

TEST(StopCheckerTest, OneCharacterPerDelta) {
  for (const Case& c : Cases()) {
    const Outcome o = RunChecker(c.stops, CodePoints(c.text));
    EXPECT_EQ(o.text, c.expected) << c.name;
    EXPECT_EQ(o.stopped, c.stopped) << c.name;
  }
}

TEST(StopCheckerTest, RandomSplitsAtCharacterBoundaries) {
  std::mt19937 rng(17);
  for (const Case& c : Cases()) {
    const std::vector<std::string> chars = CodePoints(c.text);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::string> deltas;
      for (const std::string& ch : chars) {
        if (deltas.empty() || rng() % 3 == 0) deltas.emplace_back();
        deltas.back() += ch;
      }
      if (rng() % 2) deltas.insert(deltas.begin() + rng() % (deltas.size() + 1), "");
      const Outcome o = RunChecker(c.stops, deltas);
      EXPECT_EQ(o.text, c.expected) << c.name << " trial " << trial;
      EXPECT_EQ(o.stopped, c.stopped) << c.name << " trial " << trial;
    }
  }
}

TEST(StopCheckerTest, HoldsBackOnlyWhatCouldStillMatch) {
  StopChecker checker({"<|end|>"});
  StopChecker::Result r = checker.Push("Hello <");
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_FALSE(r.stopped);
  r = checker.Push("|en");
  EXPECT_EQ(r.text, "");
  EXPECT_FALSE(r.stopped);
  r = checker.Push("x<|");  // "<|enx" can no longer match; "<|" still can
  EXPECT_EQ(r.text, "<|enx");
  EXPECT_FALSE(r.stopped);
  r = checker.Push("end|> tail");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopCheckerTest, StopSplitAcrossManyDeltasAmongText) {
  StopChecker checker({"STOP_SEQUENCE"});
  std::string emitted;
  const std::string text = "some text STOP_SEQ STOP_SEQUENCE hidden";
  bool stopped = false;
  for (char ch : text) {
    StopChecker::Result r = checker.Push(std::string(1, ch));
    emitted += r.text;
    // Nothing past the start of the stop string is ever emitted.
    EXPECT_EQ(text.compare(0, emitted.size(), emitted), 0);
    EXPECT_LE(emitted.size(), text.find("STOP_SEQUENCE"));
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(emitted, "some text STOP_SEQ ");
}

TEST(StopCheckerTest, FlushReleasesHeldText) {
  StopChecker checker({"\n\nUser:"});
  EXPECT_EQ(checker.Push("answer\n").text, "answer");
  EXPECT_EQ(checker.Push("\nUs").text, "");
  EXPECT_EQ(checker.Flush(), "\n\nUs");
  EXPECT_EQ(checker.Flush(), "");
}

}  // namespace
}  // namespace beacon
