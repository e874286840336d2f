#include "bench/grammar_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "engine/generation.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/step_executor.h"

namespace beacon {

const char kGrammarBenchSchema[] = R"({"type": "array", "minItems": 1000, "items": {"type": "object",
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                 "tags": {"type": "array", "items": {"enum": ["admin", "user", "guest"]}}},
  "required": ["name", "age", "tags"]}})";

double GrammarBenchResult::Median(const std::vector<double>& v) const {
  if (v.empty()) return 0;
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

namespace {

using Clock = std::chrono::steady_clock;

// One round: `batch` fresh sequences prefilled (not timed), one warm-up
// step, then `steps` timed decode steps; tokens per second.
absl::StatusOr<double> Round(Runtime* rt, KvCache* cache, const std::vector<int32_t>& prompt, int32_t batch,
                             int32_t steps, std::shared_ptr<const CompiledGrammar> grammar) {
  GenerationOptions o;
  o.max_tokens = steps + 4;
  o.ignore_eos = true;
  o.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  o.grammar = std::move(grammar);
  std::vector<std::unique_ptr<Generation>> gens;
  std::vector<ExecItem> items;
  for (int32_t b = 0; b < batch; ++b) {
    auto g = Generation::Create(rt->tokenizer(), cache, rt->config(), prompt, o);
    if (!g.ok()) return g.status();
    (*g)->set_thread_pool(rt->backend()->host_pool());
    items.push_back(ExecItem{g->get(), static_cast<int32_t>(prompt.size())});
    gens.push_back(*std::move(g));
  }
  StepExecutor executor(rt->backend());
  std::vector<ExecResult> results;
  if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;  // the prefill and first token
  for (ExecItem& item : items) item.max_tokens = 1;
  if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;  // warm-up
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < steps; ++i) {
    if (absl::Status s = executor.Run(items, &results); !s.ok()) return s;
    for (const ExecResult& r : results) {
      if (r.event.finish != FinishReason::kNone) {
        return absl::InternalError("grammar bench: a sequence ended before the timed steps did");
      }
    }
  }
  return batch * steps / std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<GrammarBenchResult> BenchGrammar(Runtime* rt, int32_t batch, int32_t steps, int32_t rounds,
                                                const std::string& schema) {
  GrammarBenchResult out;
  out.batch = batch;
  out.steps = steps;
  auto compiler = GrammarCompiler::Create(*rt->tokenizer(), rt->config().vocab_size, GrammarCompilerOptions());
  if (!compiler.ok()) return compiler.status();
  GrammarSpec spec;
  spec.kind = GrammarKind::kJsonSchema;
  spec.source = schema;
  spec.field = "schema";
  auto t0 = Clock::now();
  auto grammar = (*compiler)->Compile(spec);
  if (!grammar.ok()) return grammar.status();
  out.compile_cold_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  t0 = Clock::now();
  if (auto again = (*compiler)->Compile(spec); !again.ok()) return again.status();
  out.compile_cached_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  absl::StatusOr<std::vector<int32_t>> prompt =
      rt->EncodePrompt("List the users of the system as JSON.", /*chat=*/true, "");
  if (!prompt.ok()) return prompt.status();
  auto cache = rt->MakeKvCache(int64_t{batch} * (static_cast<int64_t>(prompt->size()) + steps + 32));
  if (!cache.ok()) return cache.status();
  for (int32_t r = 0; r < rounds; ++r) {
    for (bool constrained : {false, true}) {
      absl::StatusOr<double> tps = Round(rt, cache->get(), *prompt, batch, steps, constrained ? *grammar : nullptr);
      if (!tps.ok()) return tps.status();
      (constrained ? out.grammar_tokens_per_s : out.free_tokens_per_s).push_back(*tps);
    }
  }
  return out;
}

}  // namespace beacon
