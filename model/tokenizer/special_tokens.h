// Cuts text at occurrences of special tokens before BPE, the way llama.cpp's
// tokenizer_st_partition does with parse_special: tokens are tried longest
// text first (ties by id), each one across all the text not yet claimed by a
// longer one, every occurrence left to right.
//
// Which tokens take part: with parse_special, control, user-defined and
// unknown-type tokens; without it, user-defined tokens only. The latter is
// llama.cpp's (and HF tokenizers') behaviour: added tokens that are not
// "special" are always matched; control tokens such as <|im_start|> stay
// plain text, so user content cannot inject them.
#ifndef BEACON_MODEL_TOKENIZER_SPECIAL_TOKENS_H_
#define BEACON_MODEL_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace beacon {

class SpecialTokenSplitter {
 public:
  struct Candidate {
    int32_t id;
    std::string text;
    bool control;  // control or unknown type: matched only with parse_special
  };
  // One piece of the input: a special token, or a run of plain text.
  struct Fragment {
    int32_t token;  // the special token's id, or -1 for text
    size_t begin;   // text range (for tokens: where the token's text was)
    size_t length;
  };

  SpecialTokenSplitter() = default;
  // Candidates with empty text are ignored.
  explicit SpecialTokenSplitter(std::vector<Candidate> candidates);

  std::vector<Fragment> Split(std::string_view text, bool parse_special) const;

 private:
  std::vector<Candidate> candidates_;  // longest text first, then by id
};

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_SPECIAL_TOKENS_H_
