// beacon-serve-bench: what KV compression buys the continuous-batching
// scheduler, in-process (no network): the same long-output workload under
// `full` and under a compressing policy, on the same KV pool, in one run.
//
//   beacon-serve-bench --model M --requests 32 --prompt-len 64 --output-len 2048
//       --pool-seqs 8 --kv-policy full,beacon --kv-budget 256
//
// The pool holds --pool-seqs full-length sequences (prompt + output). Every
// request is queued at t=0 (ignore_eos, greedy) and the scheduler runs in
// reserve mode until all finish. Reported per policy: peak concurrent
// sequences, output tokens/s, wall time, peak KV blocks in use (bytes), and
// the per-request reserved footprint.
//
// --snapshot FILE writes one JSON line per request (its token ids' hash,
// finish reason, cached, evicted and preempted counts): run it before and
// after a change to the serving core that must not change outputs, with
// --admission optimistic (preemptions) and --shared-prefix (prefix-cache
// hits) to take every path, and diff the files.
#include <chrono>
#include <cstdio>

#include "absl/strings/str_split.h"
#include "engine/runtime.h"
#include "engine/serving/generation_engine.h"
#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

// Counts tokens; nothing is streamed anywhere.
class CountSink : public RequestSink {
 public:
  void OnTokens(std::span<const int32_t> ids, std::string_view, TextPart, std::span<const PositionLogprobs>) override {
    tokens += ids.size();
    for (int32_t id : ids) ids_hash = (ids_hash ^ static_cast<uint32_t>(id)) * 0x100000001b3ull;  // FNV-1a
  }
  void OnFinish(const StreamFinal& f) override { final = f; }
  void OnRejected(const absl::Status& s) override { rejected = s; }
  int64_t tokens = 0;
  uint64_t ids_hash = 0xcbf29ce484222325ull;
  StreamFinal final;
  absl::Status rejected;
};

struct Result {
  std::string policy;
  int32_t peak_running = 0;
  int64_t output_tokens = 0;
  double seconds = 0;
  int32_t peak_blocks = 0;
  int32_t reserved_tokens = 0;
  int32_t peak_cached_tokens = 0;
  nlohmann::json snapshot = nlohmann::json::array();  // one object per request (--snapshot)
};

absl::StatusOr<Result> RunPolicy(Runtime* rt, const cli::Args& args, const std::string& policy) {
  const int32_t n_req = static_cast<int32_t>(*args.Int("requests"));
  const int32_t n_prompt = static_cast<int32_t>(*args.Int("prompt-len"));
  const int32_t n_out = static_cast<int32_t>(*args.Int("output-len"));
  const int64_t pool_tokens = *args.Int("pool-seqs") * (n_prompt + n_out);
  absl::StatusOr<std::unique_ptr<KvCache>> made_cache = rt->MakeKvCache(pool_tokens);
  if (!made_cache.ok()) return made_cache.status();
  std::unique_ptr<KvCache> cache = *std::move(made_cache);
  GenerationEngine engine(rt->backend(), cache.get(), rt->tokenizer(), rt->config());
  SchedulerConfig sc;
  sc.max_running = static_cast<int32_t>(*args.Int("max-running"));
  sc.max_step_tokens = std::max<int32_t>(512, sc.max_running);
  sc.max_waiting = n_req;
  absl::StatusOr<AdmissionMode> mode = ParseAdmissionMode(args.Str("admission"));
  if (!mode.ok()) return mode.status();
  sc.admission = *mode;
  Scheduler sched(sc, cache.get(), &engine);
  if (args.Flag("prefix-cache")) {
    sched.kv().EnablePrefixCache(GenerationEngine::PrefixCacheSaltFor(args.Str("model"), rt->config(), *cache));
  }
  const int32_t shared = std::min<int32_t>(static_cast<int32_t>(*args.Int("shared-prefix")), n_prompt);

  absl::StatusOr<KvPolicyOptions> defaults = KvPolicyOptions::DefaultsForName(policy);
  if (!defaults.ok()) return defaults.status();
  KvPolicyOptions kv = *std::move(defaults);
  kv.budget = static_cast<int32_t>(*args.Int("kv-budget"));
  if (args.Has("kv-interval")) kv.interval = static_cast<int32_t>(*args.Int("kv-interval"));
  std::vector<std::shared_ptr<CountSink>> sinks;
  for (int32_t i = 0; i < n_req; ++i) {
    PreparedRequest p;
    // Prompts of exactly n_prompt ids (ordinary vocabulary tokens), the
    // first `shared` the same for all, the rest each request's own.
    for (int32_t t = 0; t < n_prompt; ++t)
      p.prompt.push_back(1000 + ((t < shared ? 0 : i) * 7919 + t * 104729) % 40000);
    p.options.max_tokens = n_out;
    p.options.ignore_eos = true;
    p.options.kv = kv;
    p.peak_slots = static_cast<int32_t>(SequenceCompressor::PeakSlots(kv, n_prompt, n_out));
    p.arrival = Clock::now();
    auto sink = std::make_shared<CountSink>();
    sinks.push_back(sink);
    if (absl::Status s = AddRequest(sched, engine, static_cast<RequestId>(i) + 1, std::move(p), sink); !s.ok()) {
      return s;
    }
  }
  Result res;
  res.policy = policy;
  const auto t0 = Clock::now();
  auto last_report = t0;
  while (sched.HasWork()) {
    StepReport rep = sched.Step(Clock::now());
    if (!rep.engine_status.ok()) return rep.engine_status;
    res.peak_running = std::max(res.peak_running, rep.decode_seqs + rep.prefill_seqs);
    res.peak_blocks = std::max(res.peak_blocks, sched.kv().TotalBlocks() - sched.kv().FreeBlocks());
    if (Clock::now() - last_report > std::chrono::seconds(10)) {
      last_report = Clock::now();
      std::fprintf(stderr, "  %s: %lld tokens, %d running, %d waiting\n", policy.c_str(),
                   static_cast<long long>(engine.totals().generation_tokens), sched.num_running(), sched.num_waiting());
    }
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& s : sinks) {
    res.output_tokens += s->final.completion_tokens;
    res.reserved_tokens = std::max(res.reserved_tokens, s->final.kv.reserved_tokens);
    res.peak_cached_tokens = std::max(res.peak_cached_tokens, s->final.kv.peak_cached_tokens);
    const StreamFinal& f = s->final;
    res.snapshot.push_back({{"policy", policy},
                            {"request", res.snapshot.size()},
                            {"tokens", s->tokens},
                            {"ids_fnv1a", s->ids_hash},
                            {"finish", static_cast<int>(f.reason)},
                            {"completion_tokens", f.completion_tokens},
                            {"cached_tokens", f.cached_tokens},
                            {"evictions", f.kv.evictions},
                            {"evicted_tokens", f.kv.evicted_tokens},
                            {"peak_cached_tokens", f.kv.peak_cached_tokens},
                            {"reserved_tokens", f.kv.reserved_tokens},
                            {"preemptions", f.kv.preemptions}});
  }
  return res;
}

int Main(int argc, char** argv) {
  cli::Args args;
  args.Declare("model", false, "models/default.gguf", "model");
  args.Declare("threads", false, "0", "CPU threads (0 = all)");
  args.Declare("requests", false, "32", "requests, all queued at t=0");
  args.Declare("prompt-len", false, "64", "prompt tokens per request");
  args.Declare("output-len", false, "2048", "output tokens per request (ignore_eos)");
  args.Declare("pool-seqs", false, "8", "KV pool size in full-length sequences");
  args.Declare("max-running", false, "64", "scheduler running cap");
  args.Declare("kv-policy", false, "full,beacon", "KV policies to compare, comma-separated");
  args.Declare("kv-budget", false, "256", "budget of the compressing policies");
  args.Declare("kv-interval", false, "", "eviction interval (default: the policy's)");
  args.Declare("admission", false, "reserve", "scheduler admission: reserve, or optimistic (preempts)");
  args.Declare("prefix-cache", true, "false", "automatic prefix caching (as beacon-serve --prefix-cache)");
  args.Declare("shared-prefix", false, "0", "prompt tokens every request shares (prefix-cache hits)");
  args.Declare("json", false, "", "also write the results to this JSON file");
  args.Declare("snapshot", false, "", "write one JSON line per request (token ids' hash, finish, KV counts)");
  args.Refuse("prompt-tokens", "--prompt-tokens was renamed --prompt-len (a count)");
  args.Refuse("output-tokens", "--output-tokens was renamed --output-len (a count)");
  args.Refuse("policies", "--policies was renamed --kv-policy (a comma list)");
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "beacon-serve-bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (args.help()) {
    std::printf("%s", args.Help("usage: beacon-serve-bench [--model M] [--kv-policy full,beacon] [options]").c_str());
    return 0;
  }
  if (!args.positional().empty()) {
    std::fprintf(stderr, "beacon-serve-bench: unexpected argument '%s'\n", args.positional()[0].c_str());
    return 2;
  }
  if (!args.Int("shared-prefix").ok() || *args.Int("shared-prefix") < 0) {
    std::fprintf(stderr, "beacon-serve-bench: --shared-prefix must be a non-negative integer\n");
    return 2;
  }
  for (const char* f :
       {"requests", "prompt-len", "output-len", "pool-seqs", "max-running", "kv-budget", "kv-interval"}) {
    if (std::string(f) == "kv-interval" && !args.Has(f)) continue;
    if (!args.Int(f).ok() || *args.Int(f) < 1) {
      std::fprintf(stderr, "beacon-serve-bench: --%s must be a positive integer\n", f);
      return 2;
    }
  }
  if (!args.Int("threads").ok() || *args.Int("threads") < 0) {
    std::fprintf(stderr, "beacon-serve-bench: --threads must be a non-negative integer\n");
    return 2;
  }
  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.threads = static_cast<int>(*args.Int("threads"));
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) {
    std::fprintf(stderr, "beacon-serve-bench: %s\n", std::string(rt.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<KvCache>> probe_cache = (*rt)->MakeKvCache(16);
  if (!probe_cache.ok()) {
    std::fprintf(stderr, "beacon-serve-bench: %s\n", std::string(probe_cache.status().message()).c_str());
    return 1;
  }
  const size_t bytes_per_token = (*probe_cache)->BytesPerToken();
  std::printf("%d requests x (%lld prompt + %lld output) tokens, pool = %lld full-length sequences\n",
              static_cast<int>(*args.Int("requests")), static_cast<long long>(*args.Int("prompt-len")),
              static_cast<long long>(*args.Int("output-len")), static_cast<long long>(*args.Int("pool-seqs")));
  std::printf("%-8s %12s %12s %10s %14s %16s %14s\n", "policy", "peak concur", "tok/s", "wall s", "peak KV MiB",
              "reserved/req", "peak cached");
  nlohmann::json out = nlohmann::json::array();
  std::string snapshot;
  for (absl::string_view p : absl::StrSplit(args.Str("kv-policy"), ',', absl::SkipEmpty())) {
    absl::StatusOr<Result> r = RunPolicy(rt->get(), args, std::string(p));
    if (!r.ok()) {
      std::fprintf(stderr, "beacon-serve-bench: %s: %s\n", std::string(p).c_str(),
                   std::string(r.status().message()).c_str());
      return 1;
    }
    const double mib = static_cast<double>(r->peak_blocks) * 16 * bytes_per_token / (1 << 20);
    std::printf("%-8s %12d %12.1f %10.1f %14.1f %16d %14d\n", r->policy.c_str(), r->peak_running,
                r->output_tokens / r->seconds, r->seconds, mib, r->reserved_tokens, r->peak_cached_tokens);
    std::fflush(stdout);
    out.push_back({{"policy", r->policy},
                   {"peak_running", r->peak_running},
                   {"output_tokens", r->output_tokens},
                   {"seconds", r->seconds},
                   {"tokens_per_second", r->output_tokens / r->seconds},
                   {"peak_kv_mib", mib},
                   {"reserved_tokens_per_request", r->reserved_tokens},
                   {"peak_cached_tokens", r->peak_cached_tokens}});
    for (const nlohmann::json& line : r->snapshot) snapshot += line.dump() + "\n";
  }
  if (args.Has("snapshot") && !args.Str("snapshot").empty()) {
    FILE* f = std::fopen(args.Str("snapshot").c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "beacon-serve-bench: cannot write --snapshot %s\n", args.Str("snapshot").c_str());
      return 1;
    }
    std::fputs(snapshot.c_str(), f);
    std::fclose(f);
  }
  if (args.Has("json")) {
    FILE* f = std::fopen(args.Str("json").c_str(), "w");
    if (f != nullptr) {
      std::fputs(out.dump(2).c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-serve-bench", &beacon::Main, argc, argv); }
