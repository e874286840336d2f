// One sequence's place in its grammar: which tokens may come next (a bitmask
// the sampler applies) and the tokens accepted so far. A Generation owns one
// when its request has a grammar, and feeds it only the answer's tokens: the
// constraint starts after the reasoning ends (engine/generation.h).
//
// Masks are words of 32 bits, token t allowed when bit t % 32 of word t / 32
// is set (xgrammar's layout, which the CUDA sampler takes as it is).
//
// Thread ownership: the engine thread, or one pool task at a time.
#ifndef BEACON_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_
#define BEACON_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <span>

#include "engine/grammar/grammar_compiler.h"

namespace beacon {

// Words of a mask over `vocab_size` tokens.
inline int32_t MaskWords(int32_t vocab_size) { return (vocab_size + 31) / 32; }

inline bool MaskAllows(std::span<const uint32_t> mask, int32_t token) {
  const size_t word = static_cast<size_t>(token) / 32;
  return token >= 0 && word < mask.size() && ((mask[word] >> (token % 32)) & 1u) != 0;
}

class GrammarMatcher {
 public:
  // `grammar` must not be null.
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // The model's vocabulary size the grammar was compiled for.
  int32_t vocab_size() const;
  // Fills `mask` (MaskWords(vocab_size()) words) with the tokens allowed
  // next; once the grammar is complete only end-of-generation tokens are.
  // Returns false when no token is allowed (a grammar that cannot go on).
  bool FillNextTokenMask(std::span<uint32_t> mask);
  // Advances past `token`; false (state unchanged) when the grammar does not
  // allow it.
  bool Accept(int32_t token);
  // The grammar is complete and an end-of-generation token was accepted.
  bool terminated() const;
  // The grammar is complete: an end token may come now.
  bool can_end() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_
