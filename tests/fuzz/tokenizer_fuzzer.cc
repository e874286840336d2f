// libFuzzer target for the tokenizer (model/tokenizer/): encoding arbitrary
// bytes, and the streaming detokenizer over arbitrary token ids. Both see a
// client's input: prompt text of any bytes, and the ids of a token-id prompt
// or of whatever the model samples.
//
// The tokenizer is a real one: DeepSeek-R1-Distill-Qwen-7B's vocabulary
// (tests/fixtures/tokenizers, the Qwen2 byte-level BPE with 151K ids and its
// added tokens). The first byte holds flags (bit 0 parse_special, bit 1
// add_bos, bit 2 render_special, bit 3: the rest is token ids, three bytes
// each, instead of text; bit 4 without bit 3: the rest is text split by every
// pre-tokenizer, not only this vocabulary's Qwen2 one). Properties checked,
// beyond "no crash":
//   - every id Encode returns is inside the vocabulary;
//   - byte-level BPE loses nothing: without special parsing, Decode(Encode(t))
//     == t for every valid UTF-8 text t (the only text the APIs pass on: both
//     refuse invalid UTF-8 naming the field; invalid input must still encode
//     without a crash, its bytes the pre-tokenizer's to replace);
//   - every pre-tokenizer (GPT-2, StarCoder, Llama 3, Qwen2, the default)
//     covers the text: its code point spans are contiguous from the first
//     code point to the last, and for valid UTF-8 its words concatenate
//     back to the text;
//   - the streaming detokenizer emits valid UTF-8 only, and everything it
//     emits equals the whole sequence's Decode with invalid sequences
//     replaced (SanitizeUtf8 of it), however the ids split characters.
// A property that fails aborts, so libFuzzer records the input.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/tokenizer_corpus.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/pretokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "tests/fuzz/fuzz_fixtures.h"
#include "util/utf8.h"

namespace {

const beacon::Tokenizer& Tok() { return beacon::fuzz::R1Tokenizer(); }

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "property failed: %s\n", what);
    std::abort();
  }
}

void FuzzText(std::string_view text, bool parse_special, bool add_bos, bool render_special) {
  const beacon::Tokenizer& tok = Tok();
  const std::vector<int32_t> ids = tok.Encode(text, parse_special, add_bos);
  for (int32_t id : ids) Check(id >= 0 && id < tok.vocab_size(), "Encode returned an id outside the vocabulary");
  if (!parse_special && !add_bos && beacon::IsValidUtf8(text)) {
    Check(tok.Decode(ids, /*render_special=*/true) == text, "Decode(Encode(text)) != text");
  }
  volatile size_t sink = tok.Decode(ids, render_special).size();
  (void)sink;
}

void FuzzPreTokenizers(std::string_view text) {
  const bool valid = beacon::IsValidUtf8(text);
  const std::vector<uint32_t> cps = beacon::DecodeUtf8Lenient(text);
  for (beacon::PreTokenizerKind kind :
       {beacon::PreTokenizerKind::kDefault, beacon::PreTokenizerKind::kGpt2, beacon::PreTokenizerKind::kStarCoder,
        beacon::PreTokenizerKind::kLlama3, beacon::PreTokenizerKind::kQwen2}) {
    const beacon::PreTokenizer pre(kind);
    std::vector<std::string> words;
    pre.Split(text, &words);
    if (valid) {  // invalid bytes became U+FFFD: no round trip to check then
      std::string joined;
      for (const std::string& w : words) joined += w;
      Check(joined == text, "a pre-tokenizer's words do not concatenate to the text");
    }
    uint32_t next = 0;
    for (const beacon::CodepointSpan& span : pre.SplitCodepoints(cps)) {
      Check(span.begin == next && span.end > span.begin, "pre-tokenizer spans are not contiguous and non-empty");
      next = span.end;
    }
    Check(next == cps.size(), "pre-tokenizer spans do not reach the last code point");
  }
}

void FuzzIds(std::string_view bytes, bool render_special) {
  const beacon::Tokenizer& tok = Tok();
  std::vector<int32_t> ids;
  // Three bytes an id: 2^24 values over the ~152K ids, so every id is
  // reachable, the special ones at the vocabulary's end (<think>, </think>,
  // EOS) included. (Two bytes times 3 reached only multiples of 3: issue 46.)
  for (size_t i = 0; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) |
                       (static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8) |
                       (static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 2])) << 16);
    ids.push_back(static_cast<int32_t>(v % static_cast<uint32_t>(tok.vocab_size())));
  }
  beacon::IncrementalDetokenizer detok(&tok, render_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string delta = detok.Push(id);
    Check(beacon::IsValidUtf8(delta), "a streamed delta is not valid UTF-8");
    streamed += delta;
  }
  const std::string tail = detok.Flush();
  Check(beacon::IsValidUtf8(tail), "the flushed tail is not valid UTF-8");
  streamed += tail;
  Check(streamed == beacon::SanitizeUtf8(tok.Decode(ids, render_special)),
        "the streamed text differs from the whole sequence's decoding");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (flags & 8) {
    FuzzIds(rest, (flags & 4) != 0);
  } else if (flags & 16) {
    FuzzPreTokenizers(rest);
  } else {
    FuzzText(rest, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0);
  }
  return 0;
}
