// Compiles GrammarSpecs for one model's vocabulary with xgrammar (the engine
// vLLM, SGLang and TensorRT-LLM use; built from its PyPI source distribution,
// CMakeLists.txt "xgrammar"), once per distinct spec: compiled grammars are
// kept in a cache bounded in entries and bytes, least recently used first
// out, and a spec being compiled is compiled once however many requests wait
// for it.
//
// Compiling runs on the compiler's own threads, never on the engine thread:
// PrepareRequest calls Compile on a front-end thread and waits at most
// compile_timeout_ms. A compile that takes longer is reported to the request
// as INVALID_ARGUMENT naming its field; it runs to its end in the background
// (xgrammar cannot stop one) and its grammar is cached. At most
// compile_threads compiles run and max_queued wait: past that Compile
// answers RESOURCE_EXHAUSTED at once, so slow schemas can slow only requests
// that bring schemas, never the others.
//
// Thread safety: every method may be called from any thread.
#ifndef BEACON_ENGINE_GRAMMAR_GRAMMAR_COMPILER_H_
#define BEACON_ENGINE_GRAMMAR_GRAMMAR_COMPILER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar_spec.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {

// A grammar compiled for one vocabulary (opaque outside engine/grammar/).
struct CompiledGrammar;

struct GrammarCompilerOptions {
  GrammarLimits limits;
  int64_t compile_timeout_ms = 10'000;
  int32_t compile_threads = 2;
  int32_t max_queued = 32;
  int64_t cache_bytes = int64_t{512} << 20;
  int32_t cache_entries = 4096;
};

class GrammarCompiler {
 public:
  // The vocabulary is the tokenizer's, padded to the model's `vocab_size`
  // (ids past the tokenizer's, and control tokens, are never allowed); the
  // grammar's end is any end-of-generation token of the tokenizer.
  // INVALID_ARGUMENT for options out of range.
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> Create(const Tokenizer& tokenizer, int32_t vocab_size,
                                                                 const GrammarCompilerOptions& options);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // The compiled grammar of `spec`: INVALID_ARGUMENT naming spec.field for a
  // spec over the limits, a schema, regex or grammar xgrammar refuses (with
  // its message), or a compile past the timeout; RESOURCE_EXHAUSTED when the
  // compile queue is full.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const GrammarSpec& spec);

  // For a strict JSON schema: INVALID_ARGUMENT naming spec.field when
  // xgrammar would enforce it looser than written (what Compile refuses), or
  // refuses it. Converts the schema alone, on the calling thread, without the
  // compile against the vocabulary (milliseconds at the size limits): for a
  // schema that is part of a larger grammar, such as a strict tool's
  // parameters inside the structural tag of the calls. OK for anything else.
  // Both keep their refusals (and this its verdicts) by the spec's cache key,
  // bounded, so a resent spec is answered from memory.
  absl::Status CheckEnforced(const GrammarSpec& spec) const;

  struct Stats {
    int64_t hits = 0;      // served from the cache, a kept refusal, or a compile already running
    int64_t compiles = 0;  // compiles started
    int64_t errors = 0;    // specs refused by xgrammar
    int64_t timeouts = 0;  // requests that stopped waiting
    int64_t rejected = 0;  // RESOURCE_EXHAUSTED: the queue was full
    int64_t cached = 0;    // grammars in the cache now
    int64_t cache_bytes = 0;
  };
  Stats stats() const;
  const GrammarCompilerOptions& options() const;
  int32_t vocab_size() const;

 private:
  struct Impl;
  explicit GrammarCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_GRAMMAR_GRAMMAR_COMPILER_H_
