// The request readers' fuzz targets (openai, grpc): a server's limits, small
// enough that a fuzzed request stays cheap, with the R1 tokenizer's reasoning
// parser on; and what every prepared request must hold for the engine.
#ifndef BEACON_TESTS_FUZZ_FUZZ_SERVE_LIMITS_H_
#define BEACON_TESTS_FUZZ_FUZZ_SERVE_LIMITS_H_

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "engine/grammar/grammar_compiler.h"
#include "engine/reasoning.h"
#include "engine/serving/serve_request.h"
#include "engine/tools/tool_format.h"
#include "kv/policy/kv_policy.h"
#include "tests/fuzz/fuzz_fixtures.h"

namespace beacon::fuzz {

inline const ServeLimits& FuzzServeLimits() {
  static const ServeLimits limits = [] {
    ServeLimits l;
    l.context_length = 4096;
    l.default_max_tokens = 64;
    l.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
    l.kv_default.budget = 256;
    l.kv_limits.min_budget = 32;
    l.kv_limits.max_budget = 2048;
    if (auto r = ResolveReasoningParser("auto", R1Tokenizer()); r.ok()) l.reasoning = *r;
    if (auto t = ResolveToolSyntax("auto", R1Tokenizer().chat_template_source()); t.ok()) l.tool_syntax = *t;
    // Structured output compiles for real (engine/grammar/), within small bounds.
    static std::unique_ptr<GrammarCompiler> grammars = [] {
      GrammarCompilerOptions o;
      o.limits.max_source_bytes = 16 << 10;
      o.compile_timeout_ms = 5000;
      o.compile_threads = 1;
      o.cache_entries = 64;
      auto c = GrammarCompiler::Create(R1Tokenizer(), R1Tokenizer().vocab_size(), o);
      return c.ok() ? *std::move(c) : nullptr;
    }();
    l.grammars = grammars.get();
    return l;
  }();
  return limits;
}

// What the engine relies on: a prompt of at least one id, inside the
// vocabulary, shorter than the context. Aborts (a finding) otherwise.
inline void CheckPrepared(const PreparedRequest& p) {
  for (int32_t id : p.prompt) {
    if (id < 0 || id >= R1Tokenizer().vocab_size()) std::abort();
  }
  if (p.prompt.empty() || static_cast<int32_t>(p.prompt.size()) >= FuzzServeLimits().context_length) std::abort();
}

}  // namespace beacon::fuzz

#endif  // BEACON_TESTS_FUZZ_FUZZ_SERVE_LIMITS_H_
