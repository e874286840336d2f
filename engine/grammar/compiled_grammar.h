// The xgrammar side of a CompiledGrammar (grammar_compiler.h): only
// engine/grammar/'s own .cc files include it, so xgrammar's headers stay in
// this room.
#ifndef BEACON_ENGINE_GRAMMAR_COMPILED_GRAMMAR_H_
#define BEACON_ENGINE_GRAMMAR_COMPILED_GRAMMAR_H_

#include <cstdint>

#include "engine/grammar/grammar_spec.h"
#include "xgrammar/xgrammar.h"

namespace beacon {

struct CompiledGrammar {
  xgrammar::CompiledGrammar grammar;
  GrammarKind kind;
  int32_t vocab_size;  // the model's: masks have (vocab_size + 31) / 32 words
};

}  // namespace beacon

#endif  // BEACON_ENGINE_GRAMMAR_COMPILED_GRAMMAR_H_
