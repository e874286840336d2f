#include "engine/grammar/grammar_matcher.h"

#include <cassert>

#include "engine/grammar/compiled_grammar.h"

namespace beacon {

struct GrammarMatcher::Impl {
  explicit Impl(std::shared_ptr<const CompiledGrammar> g) : grammar(std::move(g)), matcher(grammar->grammar) {}
  std::shared_ptr<const CompiledGrammar> grammar;  // kept alive for the matcher
  xgrammar::GrammarMatcher matcher;
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : impl_(std::make_unique<Impl>(std::move(grammar))) {}

GrammarMatcher::~GrammarMatcher() = default;

int32_t GrammarMatcher::vocab_size() const { return impl_->grammar->vocab_size; }

bool GrammarMatcher::FillNextTokenMask(std::span<uint32_t> mask) {
  assert(static_cast<int32_t>(mask.size()) == MaskWords(vocab_size()));
  if (impl_->matcher.IsTerminated()) {
    std::fill(mask.begin(), mask.end(), 0u);
    return false;
  }
  int64_t shape[1] = {static_cast<int64_t>(mask.size())};
  DLTensor t{};
  t.data = mask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  impl_->matcher.FillNextTokenBitmask(&t);
  for (uint32_t w : mask) {
    if (w != 0) return true;
  }
  return false;
}

bool GrammarMatcher::Accept(int32_t token) {
  if (token < 0 || token >= vocab_size() || impl_->matcher.IsTerminated()) return false;
  return impl_->matcher.AcceptToken(token);
}

bool GrammarMatcher::terminated() const { return impl_->matcher.IsTerminated(); }

bool GrammarMatcher::can_end() const { return impl_->matcher.IsCompleted(); }

}  // namespace beacon
