// beacon-serve's flags of structured output and tool calling
// (docs/serving.md, "Structured output and tools"): the tool-call format,
// the grammar compiler's threads, timeout and cache, and the bounds on what a
// request may bring (schemas and grammars, tools), and the thinking budgets
// reasoning_effort names.
#ifndef BEACON_CLI_STRUCTURED_FLAGS_H_
#define BEACON_CLI_STRUCTURED_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/serving/serve_request.h"
#include "util/cli_args.h"

namespace beacon {

struct StructuredConfig {
  std::string tool_call_parser = "auto";  // resolved against the chat template at start-up
  int32_t grammar_threads = 2;            // 0: structured output and forced tool calls are refused
  GrammarCompilerOptions grammar;
};

inline void DeclareStructuredFlags(cli::Args* args) {
  args->Declare("tool-call-parser", false, "auto",
                "the format tool calls are written and parsed in: auto (by the chat template), hermes, "
                "llama3_json or deepseek_r1");
  args->Declare("grammar-threads", false, "2",
                "threads compiling JSON schemas and grammars (0: structured output and forced tool calls off)");
  args->Declare("grammar-compile-timeout-ms", false, "10000",
                "a request whose schema or grammar compiles longer is refused (400), naming the field");
  args->Declare("grammar-queue", false, "32", "compiles waiting for a thread; beyond them a request gets 429");
  args->Declare("grammar-cache-mb", false, "512", "compiled grammars kept, least recently used out");
  args->Declare("max-grammar-bytes", false, "65536", "largest JSON schema, regex, EBNF grammar or structural tag");
  args->Declare("max-tools", false, "128", "most tools a request may offer");
  args->Declare("max-tool-schema-bytes", false, "32768", "largest parameters schema of one tool");
  args->Declare("reasoning-effort-tokens", false, "1024,4096,16384",
                "thinking budgets of reasoning_effort low, medium and high (tokens)");
}

// INVALID_ARGUMENT naming the flag.
inline absl::Status ParseStructuredFlags(const cli::Args& args, ServeLimits* limits, StructuredConfig* c) {
  c->tool_call_parser = args.Str("tool-call-parser");
  struct Bound {
    const char* flag;
    int64_t min, max;
    int64_t value = 0;
  };
  Bound b[] = {{"grammar-threads", 0, 64},
               {"grammar-compile-timeout-ms", 1, 600000},
               {"grammar-queue", 0, 1 << 16},
               {"grammar-cache-mb", 0, 1 << 20},
               {"max-grammar-bytes", 1, 16 << 20},
               {"max-tools", 0, 4096},
               {"max-tool-schema-bytes", 1, 16 << 20}};
  for (Bound& x : b) {
    absl::StatusOr<int64_t> v = args.Int(x.flag);
    if (!v.ok()) return v.status();
    if (*v < x.min || *v > x.max) {
      return absl::InvalidArgumentError(absl::StrCat("--", x.flag, ": ", *v, " is outside [", x.min, ", ", x.max, "]"));
    }
    x.value = *v;
  }
  c->grammar_threads = static_cast<int32_t>(b[0].value);
  c->grammar.compile_threads = std::max<int32_t>(1, c->grammar_threads);
  c->grammar.compile_timeout_ms = b[1].value;
  c->grammar.max_queued = static_cast<int32_t>(b[2].value);
  c->grammar.cache_bytes = b[3].value << 20;
  c->grammar.limits.max_source_bytes = b[4].value;
  limits->tool_limits.max_tools = static_cast<int32_t>(b[5].value);
  limits->tool_limits.max_parameters_bytes = b[6].value;
  limits->tool_limits.max_total_bytes = std::max(limits->tool_limits.max_total_bytes, b[6].value);
  const std::vector<std::string> parts = absl::StrSplit(args.Str("reasoning-effort-tokens"), ',');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError("--reasoning-effort-tokens: give three budgets, low,medium,high");
  }
  for (size_t i = 0; i < 3; ++i) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(parts[i], &v) || v < 1 || v > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--reasoning-effort-tokens: '", parts[i], "' is not a budget of 1 or more tokens"));
    }
    limits->reasoning_effort_tokens[i] = v;
  }
  return absl::OkStatus();
}

}  // namespace beacon

#endif  // BEACON_CLI_STRUCTURED_FLAGS_H_
