// libFuzzer target for structured output's untrusted inputs: the schemas,
// regular expressions, EBNF grammars, choices and structural tags a request
// brings, through GrammarSpec's bounds and GrammarCompiler (xgrammar,
// engine/grammar/) on a real vocabulary (the R1 distill's, 152k tokens), and
// a matcher walked along what each compiled grammar allows. Every input
// must end in a compiled grammar or a Status naming the field; never a
// crash, a hang past the compile timeout, or an exception out of the room.
//
// The first byte picks the kind (json_object, json_schema, regex, grammar,
// choice, structural_tag: byte % 6); the rest is the source (for choice,
// one choice per line). Then up to 32 steps: the mask, its lowest allowed
// token accepted.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/grammar_corpus.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/grammar/grammar_matcher.h"
#include "tests/fuzz/fuzz_fixtures.h"

namespace {

beacon::GrammarCompiler& Compiler() {
  static std::unique_ptr<beacon::GrammarCompiler> c = [] {
    beacon::GrammarCompilerOptions o;
    o.limits.max_source_bytes = 16 << 10;
    o.compile_timeout_ms = 5000;
    o.compile_threads = 1;
    o.cache_entries = 64;
    const beacon::Tokenizer& tok = beacon::fuzz::R1Tokenizer();
    auto made = beacon::GrammarCompiler::Create(tok, tok.vocab_size(), o);
    if (!made.ok()) std::abort();  // setup, not a finding
    return *std::move(made);
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr beacon::GrammarKind kKinds[] = {beacon::GrammarKind::kJsonObject, beacon::GrammarKind::kJsonSchema,
                                            beacon::GrammarKind::kRegex,      beacon::GrammarKind::kEbnf,
                                            beacon::GrammarKind::kChoice,     beacon::GrammarKind::kStructuralTag};
  beacon::GrammarSpec spec;
  spec.kind = kKinds[data[0] % 6];
  spec.strict = (data[0] & 0x80) != 0;
  spec.field = "fuzz";
  std::string source(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (spec.kind == beacon::GrammarKind::kChoice) {
    spec.choices = absl::StrSplit(source, '\n');
  } else {
    spec.source = std::move(source);
  }
  absl::StatusOr<std::shared_ptr<const beacon::CompiledGrammar>> g = Compiler().Compile(spec);
  if (!g.ok()) {
    // A refusal must name the field, as the APIs report it.
    if (g.status().message().rfind("fuzz: ", 0) != 0) std::abort();
    return 0;
  }
  beacon::GrammarMatcher m(*g);
  std::vector<uint32_t> mask(static_cast<size_t>(beacon::MaskWords(m.vocab_size())));
  for (int step = 0; step < 32 && !m.terminated(); ++step) {
    if (!m.FillNextTokenMask(mask)) break;
    int32_t next = -1;
    for (size_t w = 0; w < mask.size() && next < 0; ++w) {
      if (mask[w] != 0) next = static_cast<int32_t>(w * 32 + __builtin_ctz(mask[w]));
    }
    if (next < 0 || !m.Accept(next)) std::abort();  // the mask allowed a token the matcher refuses
  }
  return 0;
}
