#include "engine/grammar/grammar_compiler.h"

#include <deque>
#include <exception>
#include <list>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/xgrammar_log.h"
#include "util/log.h"
#include "util/mutex.h"

namespace beacon {
namespace {

// xgrammar's messages can quote the whole schema back: an error names the
// problem in its first few hundred bytes.
constexpr size_t kMaxMessageBytes = 400;
// The verdicts kept (Impl::verdicts): the oldest go first past either bound.
constexpr size_t kMaxVerdicts = 1024;
constexpr int64_t kMaxVerdictBytes = int64_t{16} << 20;

// xgrammar's message, less its log prefix ("[10:35:51] /path/file.cc:4944: ":
// a time and our build's paths say nothing to a client), trailing newlines
// and anything past kMaxMessageBytes.
std::string Clip(std::string s) {
  static const std::regex kLogPrefix(R"(^\[[0-9:]+\] [^ ]+:[0-9]+: )");
  s = std::regex_replace(s, kLogPrefix, "", std::regex_constants::format_first_only);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > kMaxMessageBytes) s = s.substr(0, kMaxMessageBytes) + "...";
  return s;
}

absl::Status FieldError(const GrammarSpec& spec, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(spec.field.empty() ? "grammar" : spec.field, ": ", std::string(what)));
}

// One xgrammar compile. JSON comes without free whitespace (one line, ", "
// and ": " between items): with any whitespace allowed, small models are
// known to fill the output with newlines until max_tokens.
xgrammar::CompiledGrammar CompileWith(xgrammar::GrammarCompiler& xg, const GrammarSpec& s) {
  constexpr bool kAnyWhitespace = false;
  switch (s.kind) {
    case GrammarKind::kJsonObject:
      // Not strict: strict mode would allow only {} for a schema naming no property.
      return xg.CompileJSONSchema(R"({"type": "object"})", kAnyWhitespace, std::nullopt, std::nullopt, false);
    case GrammarKind::kJsonSchema:
      return xg.CompileJSONSchema(s.source, kAnyWhitespace, std::nullopt, std::nullopt, s.strict);
    case GrammarKind::kRegex: return xg.CompileRegex(s.source);
    case GrammarKind::kEbnf: return xg.CompileGrammar(s.source, "root");
    case GrammarKind::kChoice: return xg.CompileGrammar(ChoiceEbnf(s.choices), "root");
    case GrammarKind::kStructuralTag: return xg.CompileStructuralTag(s.source);
  }
  throw std::invalid_argument("unknown grammar kind");
}

// Whether a grammar xgrammar compiled looser than given (its warnings,
// xgrammar_log.h) is refused: a strict JSON schema is OpenAI's promise that
// the answer matches it, and a regex has no looser reading a client could
// have meant. Everything else (a schema with strict false, EBNF, choices,
// structural tags: tools say per function whether they are strict, which
// xgrammar's warnings do not name) compiles and its warnings are logged.
bool MustBeExact(const GrammarSpec& s) {
  return (s.kind == GrammarKind::kJsonSchema && s.strict) || s.kind == GrammarKind::kRegex;
}

std::string LooserThanGiven(const GrammarSpec& s, const std::vector<std::string>& warnings) {
  return absl::StrCat(s.kind == GrammarKind::kJsonSchema
                          ? "strict: the schema would not be enforced as written (remove what xgrammar names, or "
                            "set strict false to accept a looser grammar): "
                          : "the regex would not be enforced as written (rewrite what xgrammar names): ",
                      absl::StrJoin(warnings, "; "));
}

}  // namespace

struct GrammarCompiler::Impl {
  // A compile queued or running, shared by every request waiting for it.
  struct Job {
    std::string key;
    GrammarSpec spec;
    bool done = false;
    std::shared_ptr<const CompiledGrammar> grammar;  // done: the result, or null with `error`
    std::string error;                               // xgrammar's message
  };
  struct Entry {
    std::string key;
    std::shared_ptr<const CompiledGrammar> grammar;
    int64_t bytes = 0;
  };

  Impl(const GrammarCompilerOptions& o, int32_t vocab, xgrammar::TokenizerInfo i)
      : options(o), vocab_size(vocab), info(std::move(i)) {}

  void WorkerLoop() {
    // One xgrammar compiler per worker, single-threaded, its own cache off:
    // the cache is ours (bounded, counted) and no compiler is shared.
    xgrammar::GrammarCompiler xg(info, /*max_threads=*/1, /*cache_enabled=*/false);
    for (;;) {
      std::shared_ptr<Job> job;
      {
        MutexLock lock(&mu);
        while (queue.empty() && !stop) work_cv.Wait(&mu);
        if (stop) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      std::shared_ptr<const CompiledGrammar> grammar;
      std::string error;
      std::vector<std::string> warnings;
      try {
        XgrammarWarnings caught;  // what this compile leaves unenforced
        CompiledGrammar compiled{CompileWith(xg, job->spec), job->spec.kind, vocab_size};
        warnings = caught.messages();
        if (warnings.empty() || !MustBeExact(job->spec)) {
          grammar = std::make_shared<const CompiledGrammar>(std::move(compiled));
        } else {
          error = LooserThanGiven(job->spec, warnings);
        }
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "refused by the grammar compiler";
      }
      if (grammar != nullptr && !warnings.empty()) {
        // Once per compile (a cached grammar is not logged again).
        logging::Warn("%s: the %s compiled looser than given: xgrammar warning: %s",
                      job->spec.field.empty() ? "grammar" : job->spec.field, GrammarKindName(job->spec.kind),
                      absl::StrJoin(warnings, "; xgrammar warning: "));
      }
      MutexLock lock(&mu);
      job->done = true;
      job->grammar = grammar;
      job->error = std::move(error);
      inflight.erase(job->key);
      if (grammar != nullptr) {
        Insert(job->key, grammar);
      } else {
        ++stats.errors;
        Remember(job->key, job->error);
      }
      done_cv.SignalAll();
    }
  }

  // Keeps `key`'s verdict: xgrammar's refusal (without the field), or ""
  // where CheckEnforced found the schema enforced as written.
  void Remember(const std::string& key, const std::string& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!verdicts.emplace(key, error).second) return;
    verdict_order.push_back(key);
    verdict_bytes += static_cast<int64_t>(key.size() + error.size());
    while (verdict_order.size() > kMaxVerdicts || verdict_bytes > kMaxVerdictBytes) {
      auto it = verdicts.find(verdict_order.front());
      verdict_bytes -= static_cast<int64_t>(it->first.size() + it->second.size());
      verdicts.erase(it);
      verdict_order.pop_front();
    }
  }

  void Insert(const std::string& key, std::shared_ptr<const CompiledGrammar> grammar)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (index.contains(key)) return;
    const int64_t bytes = static_cast<int64_t>(grammar->grammar.MemorySizeBytes()) + static_cast<int64_t>(key.size());
    lru.push_front(Entry{key, std::move(grammar), bytes});
    index[key] = lru.begin();
    cache_bytes += bytes;
    // The newest stays even when it alone is over the byte bound: the
    // requests waiting for it hold it anyway.
    while (lru.size() > 1 &&
           (cache_bytes > options.cache_bytes || static_cast<int64_t>(lru.size()) > options.cache_entries)) {
      cache_bytes -= lru.back().bytes;
      index.erase(lru.back().key);
      lru.pop_back();
    }
  }

  const GrammarCompilerOptions options;
  const int32_t vocab_size;
  const xgrammar::TokenizerInfo info;
  Mutex mu;
  CondVar work_cv;  // a job was queued, or stop
  CondVar done_cv;  // a job finished
  std::deque<std::shared_ptr<Job>> queue ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> inflight ABSL_GUARDED_BY(mu);
  std::list<Entry> lru ABSL_GUARDED_BY(mu);  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index ABSL_GUARDED_BY(mu);
  int64_t cache_bytes ABSL_GUARDED_BY(mu) = 0;
  // Refusals by key, so that a client resending a refused grammar costs a
  // lookup and not a compile (a refusal is a function of the spec, as a
  // compile is; a timeout is not and is not kept), and CheckEnforced's
  // verdicts. Bounded by kMaxVerdicts and kMaxVerdictBytes, oldest out first.
  absl::flat_hash_map<std::string, std::string> verdicts ABSL_GUARDED_BY(mu);
  std::deque<std::string> verdict_order ABSL_GUARDED_BY(mu);
  int64_t verdict_bytes ABSL_GUARDED_BY(mu) = 0;
  Stats stats ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::vector<std::thread> workers;
};

absl::StatusOr<std::unique_ptr<GrammarCompiler>> GrammarCompiler::Create(const Tokenizer& tokenizer, int32_t vocab_size,
                                                                         const GrammarCompilerOptions& options) {
  if (options.compile_threads < 1 || options.compile_threads > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("grammar compile threads: %d is outside [1, 64]", options.compile_threads));
  }
  if (options.max_queued < 0 || options.compile_timeout_ms < 1 || options.cache_bytes < 0 ||
      options.cache_entries < 0) {
    return absl::InvalidArgumentError("grammar compiler: queue, timeout and cache bounds must be positive");
  }
  if (vocab_size < tokenizer.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("grammar compiler: the model's vocabulary (%d) is smaller "
                        "than the tokenizer's (%d)",
                        vocab_size, tokenizer.vocab_size()));
  }
  // Each token as the bytes it stands for; control tokens decode to "" and
  // xgrammar takes empty tokens as special (never allowed). The end of the
  // grammar is any end-of-generation token.
  std::vector<std::string> vocab(static_cast<size_t>(tokenizer.vocab_size()));
  std::vector<int32_t> stops;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    vocab[static_cast<size_t>(id)] = tokenizer.TokenBytes(id, /*render_special=*/false);
    if (tokenizer.IsEndOfGeneration(id)) stops.push_back(id);
  }
  if (stops.empty())
    return absl::InvalidArgumentError("grammar compiler: the tokenizer has no end-of-generation token");
  std::optional<xgrammar::TokenizerInfo> info;
  try {
    info.emplace(vocab, xgrammar::VocabType::RAW, vocab_size, stops);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("grammar compiler: xgrammar refused the vocabulary: ", Clip(e.what())));
  }
  auto impl = std::make_unique<Impl>(options, vocab_size, std::move(*info));
  for (int32_t i = 0; i < options.compile_threads; ++i) {
    impl->workers.emplace_back([p = impl.get()] { p->WorkerLoop(); });
  }
  return std::unique_ptr<GrammarCompiler>(new GrammarCompiler(std::move(impl)));
}

GrammarCompiler::GrammarCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrammarCompiler::~GrammarCompiler() {
  {
    MutexLock lock(&impl_->mu);
    impl_->stop = true;
    impl_->work_cv.SignalAll();
  }
  for (std::thread& t : impl_->workers) t.join();
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(const GrammarSpec& spec) {
  if (absl::Status s = spec.Validate(impl_->options.limits); !s.ok()) return s;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(impl_->options.compile_timeout_ms);
  std::string key = spec.CacheKey();
  Impl& m = *impl_;
  MutexLock lock(&m.mu);
  if (auto it = m.index.find(key); it != m.index.end()) {
    ++m.stats.hits;
    m.lru.splice(m.lru.begin(), m.lru, it->second);  // now the most recently used
    return it->second->grammar;
  }
  if (auto it = m.verdicts.find(key); it != m.verdicts.end() && !it->second.empty()) {
    ++m.stats.hits;
    return FieldError(spec, Clip(it->second));
  }
  std::shared_ptr<Impl::Job> job;
  if (auto it = m.inflight.find(key); it != m.inflight.end()) {
    ++m.stats.hits;
    job = it->second;
  } else {
    if (static_cast<int64_t>(m.queue.size()) >= m.options.max_queued) {
      ++m.stats.rejected;
      return absl::ResourceExhaustedError(absl::StrCat(spec.field.empty() ? "grammar" : spec.field,
                                                       ": the grammar compiler is busy (", m.queue.size(),
                                                       " grammars waiting to compile); try again"));
    }
    job = std::make_shared<Impl::Job>();
    job->key = key;
    job->spec = spec;
    m.inflight[key] = job;
    m.queue.push_back(job);
    ++m.stats.compiles;
    m.work_cv.Signal();
  }
  while (!job->done) {
    if (m.done_cv.WaitWithDeadline(&m.mu, deadline) && !job->done) {
      ++m.stats.timeouts;
      return FieldError(spec, absl::StrFormat("compiling the %s took longer than %d ms (simplify it)",
                                              std::string(GrammarKindName(spec.kind)), m.options.compile_timeout_ms));
    }
  }
  if (job->grammar == nullptr) return FieldError(spec, Clip(job->error));
  return job->grammar;
}

absl::Status GrammarCompiler::CheckEnforced(const GrammarSpec& spec) const {
  if (spec.kind != GrammarKind::kJsonSchema || !MustBeExact(spec)) return absl::OkStatus();
  if (absl::Status s = spec.Validate(impl_->options.limits); !s.ok()) return s;
  const std::string key = spec.CacheKey();
  Impl& m = *impl_;
  {
    MutexLock lock(&m.mu);
    if (auto it = m.verdicts.find(key); it != m.verdicts.end()) {
      return it->second.empty() ? absl::OkStatus() : FieldError(spec, Clip(it->second));
    }
  }
  std::string error;
  XgrammarWarnings caught;
  try {
    // The conversion CompileWith's CompileJSONSchema starts with.
    (void)xgrammar::Grammar::FromJSONSchema(spec.source, /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                            spec.strict);
    if (!caught.messages().empty()) error = LooserThanGiven(spec, caught.messages());
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "refused by the grammar compiler";
  }
  MutexLock lock(&m.mu);
  m.Remember(key, error);
  return error.empty() ? absl::OkStatus() : FieldError(spec, Clip(error));
}

GrammarCompiler::Stats GrammarCompiler::stats() const {
  MutexLock lock(&impl_->mu);
  Stats s = impl_->stats;
  s.cached = static_cast<int64_t>(impl_->lru.size());
  s.cache_bytes = impl_->cache_bytes;
  return s;
}

const GrammarCompilerOptions& GrammarCompiler::options() const { return impl_->options; }

int32_t GrammarCompiler::vocab_size() const { return impl_->vocab_size; }

}  // namespace beacon
