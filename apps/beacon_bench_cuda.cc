// `beacon-bench cuda`, the sub-command's main: its flags, then the table
// tools/gpu-check.sh prints (docs/performance.md). Program code, so it lives in
// apps/ with beacon_bench_main.cc (built into beacon-bench when CUDA is).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/cuda_bench.h"
#include "engine/cuda/cuda_backend.h"
#include "nlohmann/json.hpp"
#include "util/cli_args.h"

namespace beacon {
namespace {

// What every part reads: the parsed flags, the runtime, the measured copy
// bandwidth, the profiler ranges and the JSON being built.
struct CudaBench {
  Runtime* rt = nullptr;
  double bandwidth = 0;  // bytes/s, read + written
  int64_t context = 0, steps = 0, budget = 0, pool_seqs = 0, prompt = 0, output = 0, tp_steps = 0;
  bool group_queries = false;  // --kv-beacon-group-queries: BeaconKV's state per KV head
  std::vector<int> batches;
  ProfileRanges* profile = nullptr;
  nlohmann::json* out = nullptr;
};

// 1. Decode step vs the HBM roofline. "device ms" is the step's device work
// alone (events); step ms - device ms is the host's share (validation, plan,
// upload, synchronisation), which a bare graph replay does not pay.
absl::Status RunDecode(const CudaBench& b) {
  std::printf("\n%6s %8s %10s %10s %12s %12s %12s\n", "batch", "context", "step ms", "device ms", "tokens/s",
              "roofline ms", "of roofline");
  for (int batch : b.batches) {
    absl::StatusOr<CudaDecodeResult> r =
        BenchCudaDecode(b.rt, batch, static_cast<int32_t>(b.context), static_cast<int>(b.steps), KvPolicyOptions{},
                        b.profile, absl::StrCat("decode full b=", batch, " ctx=", b.context));
    if (!r.ok()) return r.status();
    const double roof_ms = r->bytes_per_step / b.bandwidth * 1e3;
    std::printf("%6d %8lld %10.3f %10.3f %12.1f %12.3f %11.1f%%\n", batch, static_cast<long long>(b.context),
                r->step_ms, r->device_step_ms, batch * 1e3 / r->step_ms, roof_ms, 100 * roof_ms / r->step_ms);
    (*b.out)["decode"].push_back({{"batch", batch},
                                  {"context", b.context},
                                  {"step_ms", r->step_ms},
                                  {"device_step_ms", r->device_step_ms},
                                  {"bytes_per_step", r->bytes_per_step},
                                  {"roofline_fraction", roof_ms / r->step_ms}});
  }
  return absl::OkStatus();
}

KvPolicyOptions BeaconAt(const CudaBench& b) {
  KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  beacon.budget = static_cast<int32_t>(b.budget);
  beacon.beacon_group_queries = b.group_queries;
  return beacon;
}

// 2. BeaconKV overhead at batch 16: observing (no eviction: interval past the
// run) against full, plus one eviction amortised over the interval.
absl::Status RunOverhead(const CudaBench& b) {
  const KvPolicyOptions beacon = BeaconAt(b);
  const int ob = 16;
  const auto ctx = static_cast<int32_t>(b.budget);
  KvPolicyOptions observe_only = beacon;
  observe_only.interval = 1 << 20;
  absl::StatusOr<CudaDecodeResult> base = BenchCudaDecode(b.rt, ob, ctx, static_cast<int>(b.steps), KvPolicyOptions{},
                                                          b.profile, absl::StrCat("decode full b=", ob, " ctx=", ctx));
  if (!base.ok()) return base.status();
  absl::StatusOr<CudaDecodeResult> obs = BenchCudaDecode(b.rt, ob, ctx, static_cast<int>(b.steps), observe_only,
                                                         b.profile, absl::StrCat("decode beacon b=", ob, " ctx=", ctx));
  if (!obs.ok()) return obs.status();
  KvPolicyOptions evicting = beacon;
  evicting.keep_prompt = false;
  absl::StatusOr<EvictionCost> ev = BenchEviction(b.rt, evicting, beacon.budget + beacon.interval, b.profile);
  if (!ev.ok()) return ev.status();
  const double observe_share = obs->step_ms / base->step_ms - 1;
  // Each of the batch's sequences evicts once per interval steps.
  const double evict_share = ev->evict_ms * ob / beacon.interval / base->step_ms;
  std::printf(
      "\nBeaconKV overhead, batch %d at %d slots: full %.3f ms/step, beacon observing %.3f ms/step (%+.2f%%);"
      " one eviction %.2f ms (%d -> %d slots) every %d steps per sequence (%.2f%%); total %.2f%%\n",
      ob, ctx, base->step_ms, obs->step_ms, 100 * observe_share, ev->evict_ms, ev->slots_before, beacon.budget,
      beacon.interval, 100 * evict_share, 100 * (observe_share + evict_share));
  (*b.out)["beacon_overhead"] = {{"batch", ob},
                                 {"full_step_ms", base->step_ms},
                                 {"full_device_step_ms", base->device_step_ms},
                                 {"observe_step_ms", obs->step_ms},
                                 {"observe_device_step_ms", obs->device_step_ms},
                                 {"evict_ms", ev->evict_ms},
                                 {"interval", beacon.interval},
                                 {"group_queries", b.group_queries},
                                 {"overhead", observe_share + evict_share}};
  return absl::OkStatus();
}

// 3. Throughput at a pool sized for pool_seqs full sequences.
absl::Status RunThroughput(const CudaBench& b) {
  const int64_t pool_tokens = b.pool_seqs * (b.prompt + b.output);
  std::printf("\n%-14s %12s %10s %12s %10s %14s\n", "policy", "concurrency", "tokens", "tokens/s", "evictions",
              "bound tokens/s");
  const KvPolicyOptions full, beacon = BeaconAt(b);
  double tps[2] = {0, 0}, bound[2] = {0, 0};
  int i = 0;
  for (const KvPolicyOptions* o : {&full, &beacon}) {
    absl::StatusOr<ThroughputResult> r =
        BenchPoolThroughput(b.rt, *o, pool_tokens, static_cast<int32_t>(b.prompt), static_cast<int32_t>(b.output),
                            static_cast<int>(b.tp_steps));
    if (!r.ok()) return r.status();
    const std::string name = !o->compresses() ? "full" : "beacon@" + std::to_string(o->budget);
    // The bound: the same steps at the copy bandwidth, reading only what they must.
    const double tps_bound = r->bound_tokens_per_second(b.bandwidth);
    std::printf("%-14s %12d %10lld %12.1f %10lld %14.1f\n", name.c_str(), r->concurrency,
                static_cast<long long>(r->tokens), r->tokens_per_second(), static_cast<long long>(r->evictions),
                tps_bound);
    (*b.out)["throughput"].push_back({{"policy", name},
                                      {"concurrency", r->concurrency},
                                      {"tokens", r->tokens},
                                      {"seconds", r->seconds},
                                      {"tokens_per_second", r->tokens_per_second()},
                                      {"bytes_read", r->bytes_read},
                                      {"bound_tokens_per_second", tps_bound}});
    tps[i] = r->tokens_per_second();
    bound[i++] = tps_bound;
  }
  std::printf(
      "throughput ratio beacon/full: %.2fx; at the bandwidth bound %.2fx (pool %lld slots = %lld x (%lld + %lld))\n",
      tps[1] / tps[0], bound[1] / bound[0], static_cast<long long>(pool_tokens), static_cast<long long>(b.pool_seqs),
      static_cast<long long>(b.prompt), static_cast<long long>(b.output));
  (*b.out)["throughput_ratio"] = tps[1] / tps[0];
  (*b.out)["throughput_bound_ratio"] = bound[1] / bound[0];
  (*b.out)["throughput_output_len"] = b.output;
  (*b.out)["throughput_group_queries"] = b.group_queries;
  return absl::OkStatus();
}

}  // namespace

int CudaBenchMain(const cli::Args& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "beacon-bench cuda: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  CudaBench b;
  const std::vector<std::pair<const char*, int64_t*>> ints = {
      {"context", &b.context},          {"steps", &b.steps},       {"kv-budget", &b.budget},
      {"pool-seqs", &b.pool_seqs},      {"prompt-len", &b.prompt}, {"output-len", &b.output},
      {"throughput-steps", &b.tp_steps}};
  for (const auto& [name, value] : ints) {
    absl::StatusOr<int64_t> v = args.Int(name);
    if (!v.ok()) return fail(v.status());
    if (*v < 1) return fail(absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= 1")));
    *value = *v;
  }
  for (absl::string_view p : absl::StrSplit(args.Str("batches"), ',', absl::SkipEmpty())) {
    int batch;
    if (!absl::SimpleAtoi(p, &batch) || batch < 1) return fail(absl::InvalidArgumentError("--batches: bad value"));
    b.batches.push_back(batch);
  }
  // --parts: which benchmarks run (a profile or a sweep needs only some).
  absl::flat_hash_set<std::string> parts;
  for (absl::string_view p : absl::StrSplit(args.Str("parts"), ',', absl::SkipEmpty())) {
    if (p != "decode" && p != "overhead" && p != "throughput") {
      return fail(
          absl::InvalidArgumentError(absl::StrCat("--parts: unknown part \"", p, "\" (decode, overhead, throughput)")));
    }
    parts.insert(std::string(p));
  }
  absl::StatusOr<int64_t> splits = args.Int("cuda-max-splits");
  if (!splits.ok()) return fail(splits.status());
  b.group_queries = args.Flag("kv-beacon-group-queries");
  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.device = "cuda";
  ro.cuda.max_splits = static_cast<int>(*splits);
  ro.cuda.cuda_graphs = args.Flag("cuda-graphs");
  ro.cuda.tensor_core_decode = args.Flag("cuda-tensor-core-decode");
  ro.cuda.flashinfer_decode = args.Flag("cuda-flashinfer-decode");
  ro.cuda.small_batch_gemv = args.Flag("cuda-small-batch-gemv");
  ro.cuda.tensor_core_score = args.Flag("cuda-tensor-core-score");
  ro.cuda.programmatic_launch = args.Flag("cuda-programmatic-launch");
  if (absl::Status s = ro.cuda.Validate(); !s.ok()) return fail(s);
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) return fail(rt.status());
  b.rt = rt->get();
  const auto* cuda = dynamic_cast<const CudaBackend*>((*rt)->backend());
  absl::StatusOr<double> bw = DeviceCopyBandwidth();
  if (!bw.ok()) return fail(bw.status());
  b.bandwidth = *bw;
  const ModelConfig& c = (*rt)->config();
  std::printf("device %s, device-to-device copy %.2f TB/s (read+write)\n", cuda->device_name().c_str(), *bw / 1e12);
  std::printf("model %s: %d layers, hidden %d, %d/%d heads, bf16 weights streamed per step %.2f GB\n", ro.model.c_str(),
              c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, cuda->weights().streamed_bytes() / 1e9);
  ProfileRanges profile(args.Flag("profile"));
  nlohmann::json out = {{"device", cuda->device_name()},
                        {"copy_bandwidth_tbps", *bw / 1e12},
                        {"model", ro.model},
                        {"cuda_max_splits", ro.cuda.max_splits},
                        {"cuda_graphs", ro.cuda.cuda_graphs},
                        {"profiled", profile.enabled()},
                        {"cuda_tensor_core_decode", ro.cuda.tensor_core_decode},
                        {"cuda_flashinfer_decode", ro.cuda.flashinfer_decode},
                        {"cuda_small_batch_gemv", ro.cuda.small_batch_gemv},
                        {"cuda_tensor_core_score", ro.cuda.tensor_core_score},
                        {"cuda_programmatic_launch", ro.cuda.programmatic_launch}};
  b.profile = &profile;
  b.out = &out;
  using Part = absl::Status (*)(const CudaBench&);
  const std::vector<std::pair<std::string, Part>> all = {
      {"decode", RunDecode}, {"overhead", RunOverhead}, {"throughput", RunThroughput}};
  for (const auto& [name, run] : all) {
    if (!parts.contains(name)) continue;
    if (absl::Status s = run(b); !s.ok()) return fail(s);
  }
  std::printf("CUDA graphs: %lld captured, %lld replays\n", static_cast<long long>(cuda->graphs_captured()),
              static_cast<long long>(cuda->graph_replays()));
  out["profile_ranges"] = profile.labels();
  if (!args.Str("json").empty()) std::ofstream(args.Str("json")) << out.dump(2) << "\n";
  return 0;
}

}  // namespace beacon
