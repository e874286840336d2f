// beacon-run: generate a completion for one prompt on the CPU engine.
//
//   beacon-run --model PATH (--prompt TEXT | --prompt-file F | --prompt-token-ids 1,2,3) [--chat]
//              --max-tokens N --temperature T --top-p P --top-k K --seed S
//              [--ignore-eos] [--stop STR ...] --output-format text|jsonl
//
// text streams the completion to stdout; jsonl prints one object per token
// {"id":..,"text":..} and then a summary object.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/device_flags.h"
#include "cli/kv_flags.h"
#include "cli/tokenizer_flags.h"
#include "engine/batch_runner.h"
#include "engine/runtime.h"
#include "kv/policy/eviction_schedule.h"
#include "nlohmann/json.hpp"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "beacon-run: %s\n", std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

std::string Json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void DeclareRunFlags(cli::Args* args) {
  args->Declare("model", false, "models/default.gguf", "GGUF file, HF directory or dummy:config.json");
  args->Declare("prompt", false, "", "prompt text");
  args->Declare("prompt-file", false, "", "read the prompt from this file");
  args->Declare("prompt-token-ids", false, "", "the prompt as comma-separated token ids (no template)");
  args->Refuse("prompt-tokens", "--prompt-tokens was renamed --prompt-token-ids (a list of token ids)");
  args->Declare("chat", true, "false", "wrap the prompt as a user turn of the model's chat template");
  args->Declare("system", false, "", "system message (with --chat)");
  args->Declare("max-tokens", false, "256", "tokens to generate at most");
  args->Declare("temperature", false, "0", "0 = greedy");
  args->Declare("top-p", false, "1", "nucleus sampling mass (1 = off)");
  args->Declare("top-k", false, "0", "top-k sampling (0 = off)");
  args->Declare("min-p", false, "0", "min-p sampling (0 = off)");
  args->Declare("repetition-penalty", false, "1", "CTRL-style repetition penalty (1 = off)");
  args->Declare("presence-penalty", false, "0", "OpenAI presence penalty");
  args->Declare("frequency-penalty", false, "0", "OpenAI frequency penalty");
  args->Declare("seed", false, "", "sampling seed (same seed, same tokens)");
  args->Declare("ignore-eos", true, "false", "keep generating past end-of-sequence tokens");
  args->Declare("stop", false, "", "stop string (repeatable); never printed");
  args->Declare("stop-token-id", false, "", "stop token id (repeatable)");
  args->Declare("output-format", false, "text", "text or jsonl");
  args->Declare("threads", false, "0", "CPU threads (0 = all)");
  DeclareDeviceFlags(args);
  DeclareTokenizerFlags(args);
  args->Declare("prefill-chunk", false, "512", "prompt tokens per forward step");
  DeclareKvFlags(args, "full");
}

// The prompt as given: text (--prompt or --prompt-file) or token ids
// (--prompt-token-ids), exactly one of them.
struct PromptInput {
  std::string text;
  std::vector<int32_t> ids;
};

absl::StatusOr<PromptInput> ReadPrompt(const cli::Args& args) {
  PromptInput in;
  in.text = args.Str("prompt");
  if (args.Has("prompt-file")) {
    if (args.Has("prompt")) return absl::InvalidArgumentError("give --prompt or --prompt-file, not both");
    std::ifstream f(args.Str("prompt-file"), std::ios::binary);
    if (!f) return absl::NotFoundError("cannot read --prompt-file " + args.Str("prompt-file"));
    std::stringstream ss;
    ss << f.rdbuf();
    in.text = ss.str();
  }
  absl::StatusOr<std::vector<int32_t>> ids = args.IntList("prompt-token-ids");
  if (!ids.ok()) return ids.status();
  in.ids = *std::move(ids);
  if (!in.ids.empty() && !in.text.empty()) {
    return absl::InvalidArgumentError("give a text prompt or --prompt-token-ids, not both");
  }
  if (in.text.empty() && in.ids.empty()) {
    return absl::InvalidArgumentError("the prompt is empty: pass --prompt, --prompt-file or --prompt-token-ids");
  }
  return in;
}

// Sampling, stopping and --kv-* flags.
absl::StatusOr<GenerationOptions> ParseGenerationOptions(const cli::Args& args) {
  GenerationOptions opts;
  absl::StatusOr<int64_t> max_tokens = args.Int("max-tokens"), top_k = args.Int("top-k");
  absl::StatusOr<double> temp = args.Double("temperature"), top_p = args.Double("top-p"), min_p = args.Double("min-p"),
                         rep = args.Double("repetition-penalty"), pres = args.Double("presence-penalty"),
                         freq = args.Double("frequency-penalty");
  for (const absl::Status& s : {max_tokens.status(), top_k.status(), temp.status(), top_p.status(), min_p.status(),
                                rep.status(), pres.status(), freq.status()}) {
    if (!s.ok()) return s;
  }
  opts.max_tokens = static_cast<int32_t>(*max_tokens);
  opts.sampling.temperature = static_cast<float>(*temp);
  opts.sampling.top_p = static_cast<float>(*top_p);
  opts.sampling.top_k = static_cast<int32_t>(*top_k);
  opts.sampling.min_p = static_cast<float>(*min_p);
  opts.sampling.repetition_penalty = static_cast<float>(*rep);
  opts.sampling.presence_penalty = static_cast<float>(*pres);
  opts.sampling.frequency_penalty = static_cast<float>(*freq);
  if (args.Has("seed")) {
    absl::StatusOr<int64_t> seed = args.Int("seed");
    if (!seed.ok()) return seed.status();
    opts.sampling.seed = static_cast<uint64_t>(*seed);
  }
  opts.ignore_eos = args.Flag("ignore-eos");
  opts.stop = args.All("stop");
  for (const std::string& s : args.All("stop-token-id")) {
    int32_t id;
    if (!absl::SimpleAtoi(s, &id)) return absl::InvalidArgumentError("--stop-token-id expects an integer");
    opts.stop_token_ids.push_back(id);
  }
  if (absl::Status s = ParseKvOptions(args, &opts.kv); !s.ok()) return s;
  return opts;
}

// The prompt's token ids: as given, or the text encoded (with the chat
// template when asked); INVALID_ARGUMENT for ids outside the vocabulary or a
// prompt that fills the model's context.
absl::StatusOr<std::vector<int32_t>> PromptIds(const Runtime& rt, const PromptInput& in, const cli::Args& args) {
  const ModelConfig& cfg = rt.config();
  absl::StatusOr<std::vector<int32_t>> ids = in.ids;
  if (in.ids.empty()) ids = rt.EncodePrompt(in.text, args.Flag("chat"), args.Str("system"));
  if (!ids.ok()) return ids.status();
  for (int32_t id : *ids) {
    if (id < 0 || id >= cfg.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt-token-ids: token id ", id, " is outside the vocabulary [0, ", cfg.vocab_size, ")"));
    }
  }
  if (static_cast<int64_t>(ids->size()) >= cfg.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt has ", ids->size(), " tokens; the model's context is ", cfg.context_length));
  }
  return ids;
}

// Streams the generation to stdout (text, or one JSON object per token) and
// reports its figures: a JSON summary line, or a line on stderr.
absl::Status Generate(Runtime* rt, std::vector<int32_t> ids, const GenerationOptions& opts, int32_t prefill_chunk,
                      bool jsonl) {
  const ModelConfig& cfg = rt->config();
  const int32_t n_prompt = static_cast<int32_t>(ids.size());
  const int32_t max_out = std::min<int32_t>(opts.max_tokens, cfg.context_length - n_prompt);
  // The cache holds what this sequence can peak at: constant in max_tokens
  // under a compressing policy.
  absl::StatusOr<std::unique_ptr<KvCache>> cache =
      rt->MakeKvCache(SequenceCompressor::PeakSlots(opts.kv, n_prompt, max_out));
  if (!cache.ok()) return cache.status();
  absl::StatusOr<std::unique_ptr<Generation>> created =
      Generation::Create(rt->tokenizer(), cache->get(), cfg, std::move(ids), opts);
  if (!created.ok()) return created.status();
  Generation& gen = **created;
  gen.set_thread_pool(rt->backend()->host_pool());

  const auto t0 = Clock::now();
  Clock::time_point t_first;
  int32_t n_out = 0;
  Generation* gens[] = {&gen};
  BatchRunnerOptions bro;
  bro.prefill_chunk = prefill_chunk;
  absl::Status run = RunToCompletion(rt->backend(), gens, bro, [&](size_t, const TokenEvent& ev) {
    if (n_out++ == 0) t_first = Clock::now();
    if (jsonl) {
      std::printf("%s\n", Json({{"id", ev.id}, {"text", ev.text}}).c_str());
    } else {
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    }
    std::fflush(stdout);
  });
  if (!run.ok()) return run;
  const auto t1 = Clock::now();
  const double ttft = std::chrono::duration<double>(t_first - t0).count();
  const double decode_s = std::chrono::duration<double>(t1 - t_first).count();
  const double tps = n_out > 1 && decode_s > 0 ? (n_out - 1) / decode_s : 0.0;
  if (jsonl) {
    nlohmann::json summary = {
        {"finish_reason", std::string(FinishReasonName(gen.finish_reason()))},
        {"prompt_tokens", n_prompt},
        {"completion_tokens", n_out},
        {"tokens_per_second", tps},
        {"time_to_first_token_ms", ttft * 1e3},
        {"prefill_tokens_per_second", ttft > 0 ? n_prompt / ttft : 0.0},
        {"kv_peak_tokens", gen.kv()->peak_slots()},
        {"kv_policy", opts.kv.policy},
        {"evictions", gen.compressor() != nullptr ? gen.compressor()->evictions() : 0},
        {"evicted_tokens", gen.compressor() != nullptr ? gen.compressor()->evicted_slots() : 0},
    };
    std::printf("%s\n", Json(summary).c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "[%d prompt + %d completion tokens, %.1f tok/s decode, TTFT %.0f ms, finish: %s]\n", n_prompt,
                 n_out, tps, ttft * 1e3, std::string(FinishReasonName(gen.finish_reason())).c_str());
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  cli::Args args;
  DeclareRunFlags(&args);
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) return Fail(s);
  if (args.help()) {
    std::printf("%s", args.Help("usage: beacon-run --model PATH (--prompt TEXT | --prompt-file FILE | "
                                "--prompt-token-ids 1,2,3) [options]")
                          .c_str());
    return 0;
  }
  if (!args.positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'"));
  }
  const std::string format = args.Str("output-format");
  if (format != "text" && format != "jsonl") {
    return Fail(absl::InvalidArgumentError("--output-format must be text or jsonl, got '" + format + "'"));
  }
  absl::StatusOr<PromptInput> prompt = ReadPrompt(args);
  if (!prompt.ok()) return Fail(prompt.status());
  absl::StatusOr<int64_t> threads = args.Int("threads"), chunk = args.Int("prefill-chunk");
  if (!threads.ok()) return Fail(threads.status());
  if (!chunk.ok()) return Fail(chunk.status());
  if (*chunk < 1) return Fail(absl::InvalidArgumentError("--prefill-chunk must be >= 1"));
  absl::StatusOr<GenerationOptions> opts = ParseGenerationOptions(args);
  if (!opts.ok()) return Fail(opts.status());

  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.threads = static_cast<int>(*threads);
  if (absl::Status s = ParseDeviceFlags(args, &ro); !s.ok()) return Fail(s);
  ParseTokenizerFlags(args, &ro);
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) return Fail(rt.status());
  if ((*rt)->tokenizer() == nullptr) {
    return Fail(absl::FailedPreconditionError(
        "model " + ro.model + " has no tokenizer (dummy weights); give --tokenizer, or use beacon-bench"));
  }
  if (absl::Status s = opts->Validate((*rt)->config().vocab_size); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<int32_t>> ids = PromptIds(**rt, *prompt, args);
  if (!ids.ok()) return Fail(ids.status());
  // The phase beacon-serve would give this prompt (one sample), so both
  // give it the same text.
  absl::StatusOr<bool> spread = ParseSpreadEvictionPhase(args);
  if (!spread.ok()) return Fail(spread.status());
  if (*spread && opts->kv.compresses()) {
    opts->kv.eviction_phase = EvictionSchedule::SpreadPhase(*ids, 0, 1, opts->kv.interval);
  }
  if (absl::Status s = Generate(rt->get(), *std::move(ids), *opts, static_cast<int32_t>(*chunk), format == "jsonl");
      !s.ok()) {
    return Fail(s);
  }
  return 0;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-run", &beacon::Main, argc, argv); }
