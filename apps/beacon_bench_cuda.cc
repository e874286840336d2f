// `beacon-bench cuda`, the sub-command's main: its flags, then the table
// tools/gpu-check.sh prints (docs/performance.md). Program code, so it lives in
// apps/ with beacon_bench_main.cc (built into beacon-bench when CUDA is).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/cuda_bench.h"
#include "engine/cuda/cuda_backend.h"
#include "nlohmann/json.hpp"
#include "util/cli_args.h"

namespace beacon {

int CudaBenchMain(const cli::Args& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "beacon-bench cuda: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  absl::StatusOr<int64_t> context = args.Int("context"), steps = args.Int("steps"), budget = args.Int("kv-budget"),
                          pool_seqs = args.Int("pool-seqs"), prompt = args.Int("prompt-len"),
                          output = args.Int("output-len"), tp_steps = args.Int("throughput-steps");
  for (const auto* v : {&context, &steps, &budget, &pool_seqs, &prompt, &output, &tp_steps}) {
    if (!v->ok()) return fail(v->status());
    if (**v < 1) return fail(absl::InvalidArgumentError("numeric options must be >= 1"));
  }
  std::vector<int> batches;
  for (absl::string_view p : absl::StrSplit(args.Str("batches"), ',', absl::SkipEmpty())) {
    int b;
    if (!absl::SimpleAtoi(p, &b) || b < 1) return fail(absl::InvalidArgumentError("--batches: bad value"));
    batches.push_back(b);
  }
  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.device = "cuda";
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) return fail(rt.status());
  const auto* cuda = dynamic_cast<const CudaBackend*>((*rt)->backend());
  absl::StatusOr<double> bw = DeviceCopyBandwidth();
  if (!bw.ok()) return fail(bw.status());
  const ModelConfig& c = (*rt)->config();
  std::printf("device %s, device-to-device copy %.2f TB/s (read+write)\n", cuda->device_name().c_str(), *bw / 1e12);
  std::printf("model %s: %d layers, hidden %d, %d/%d heads, bf16 weights streamed per step %.2f GB\n", ro.model.c_str(),
              c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, cuda->weights().streamed_bytes() / 1e9);
  nlohmann::json out = {{"device", cuda->device_name()}, {"copy_bandwidth_tbps", *bw / 1e12}, {"model", ro.model}};

  // 1. Decode step vs the HBM roofline.
  KvPolicyOptions full;
  std::printf("\n%6s %8s %10s %12s %12s %12s\n", "batch", "context", "step ms", "tokens/s", "roofline ms",
              "of roofline");
  for (int b : batches) {
    absl::StatusOr<CudaDecodeResult> r =
        BenchCudaDecode(rt->get(), b, static_cast<int32_t>(*context), static_cast<int>(*steps), full);
    if (!r.ok()) return fail(r.status());
    const double roof_ms = r->bytes_per_step / *bw * 1e3;
    std::printf("%6d %8lld %10.3f %12.1f %12.3f %11.1f%%\n", b, static_cast<long long>(*context), r->step_ms,
                b * 1e3 / r->step_ms, roof_ms, 100 * roof_ms / r->step_ms);
    out["decode"].push_back({{"batch", b},
                             {"context", *context},
                             {"step_ms", r->step_ms},
                             {"bytes_per_step", r->bytes_per_step},
                             {"roofline_fraction", roof_ms / r->step_ms}});
  }

  // 2. BeaconKV overhead at batch 16: observing (no eviction: interval past
  // the run) against full, plus one eviction amortised over the interval.
  KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  beacon.budget = static_cast<int32_t>(*budget);
  const int ob = 16;
  KvPolicyOptions observe_only = beacon;
  observe_only.interval = 1 << 20;
  absl::StatusOr<CudaDecodeResult> base =
      BenchCudaDecode(rt->get(), ob, static_cast<int32_t>(*budget), static_cast<int>(*steps), full);
  if (!base.ok()) return fail(base.status());
  absl::StatusOr<CudaDecodeResult> obs =
      BenchCudaDecode(rt->get(), ob, static_cast<int32_t>(*budget), static_cast<int>(*steps), observe_only);
  if (!obs.ok()) return fail(obs.status());
  KvPolicyOptions evicting = beacon;
  evicting.keep_prompt = false;
  absl::StatusOr<EvictionCost> ev = BenchEviction(rt->get(), evicting, beacon.budget + beacon.interval);
  if (!ev.ok()) return fail(ev.status());
  const double observe_share = obs->step_ms / base->step_ms - 1;
  // Each of the batch's sequences evicts once per interval steps.
  const double evict_share = ev->evict_ms * ob / beacon.interval / base->step_ms;
  std::printf(
      "\nBeaconKV overhead, batch %d at %lld slots: full %.3f ms/step, beacon observing %.3f ms/step (%+.2f%%);"
      " one eviction %.2f ms (%d -> %d slots) every %d steps per sequence (%.2f%%); total %.2f%%\n",
      ob, static_cast<long long>(*budget), base->step_ms, obs->step_ms, 100 * observe_share, ev->evict_ms,
      ev->slots_before, beacon.budget, beacon.interval, 100 * evict_share, 100 * (observe_share + evict_share));
  out["beacon_overhead"] = {{"batch", ob},
                            {"full_step_ms", base->step_ms},
                            {"observe_step_ms", obs->step_ms},
                            {"evict_ms", ev->evict_ms},
                            {"interval", beacon.interval},
                            {"overhead", observe_share + evict_share}};

  // 3. Throughput at a pool sized for pool_seqs full sequences.
  const int64_t pool_tokens = *pool_seqs * (*prompt + *output);
  std::printf("\n%-14s %12s %10s %12s %10s\n", "policy", "concurrency", "tokens", "tokens/s", "evictions");
  double tps[2] = {0, 0};
  int i = 0;
  for (const KvPolicyOptions* o : {&full, &beacon}) {
    absl::StatusOr<ThroughputResult> r =
        BenchPoolThroughput(rt->get(), *o, pool_tokens, static_cast<int32_t>(*prompt), static_cast<int32_t>(*output),
                            static_cast<int>(*tp_steps));
    if (!r.ok()) return fail(r.status());
    const std::string name = !o->compresses() ? "full" : "beacon@" + std::to_string(o->budget);
    std::printf("%-14s %12d %10lld %12.1f %10lld\n", name.c_str(), r->concurrency, static_cast<long long>(r->tokens),
                r->tokens_per_second(), static_cast<long long>(r->evictions));
    out["throughput"].push_back({{"policy", name},
                                 {"concurrency", r->concurrency},
                                 {"tokens", r->tokens},
                                 {"seconds", r->seconds},
                                 {"tokens_per_second", r->tokens_per_second()}});
    tps[i++] = r->tokens_per_second();
  }
  std::printf("throughput ratio beacon/full: %.2fx (pool %lld slots = %lld x (%lld + %lld))\n", tps[1] / tps[0],
              static_cast<long long>(pool_tokens), static_cast<long long>(*pool_seqs), static_cast<long long>(*prompt),
              static_cast<long long>(*output));
  out["throughput_ratio"] = tps[1] / tps[0];
  std::printf("CUDA graphs: %lld captured, %lld replays\n", static_cast<long long>(cuda->graphs_captured()),
              static_cast<long long>(cuda->graph_replays()));
  if (!args.Str("json").empty()) std::ofstream(args.Str("json")) << out.dump(2) << "\n";
  return 0;
}

}  // namespace beacon
