#include "planner/reproduce.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace beacon::planner {
namespace {

constexpr char kGbReadAsGib[] =
    "the published \"GB\" read as GiB (2^30 bytes): in decimal GB the full cache's weights + KV are at least "
    "85.4 GB, above the published 77.0";
constexpr char kThroughputNote[] =
    "throughput = output tokens / virtual makespan, from the roofline cost model on the H200 profile "
    "(datasheet + modelled constants; no GPU measurement)";

}  // namespace

PublishedSetup MakePublishedSetup(int32_t prompt_tokens) {
  PublishedSetup s;
  s.workload.arrival = ArrivalKind::kClosedLoop;
  s.workload.concurrency = 16;
  s.workload.num_requests = 16;
  s.workload.prompt = LengthDist::Fixed(prompt_tokens);
  s.workload.output = LengthDist::Fixed(32768);
  s.workload.max_tokens = 0;  // every request runs to its 32,768 tokens
  s.configs.push_back(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull));
  KvPolicyOptions beacon = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  beacon.budget = 2048;
  beacon.interval = 128;
  beacon.keep_prompt = true;
  s.configs.push_back(beacon);
  return s;
}

Reproduction CompareWithPublished(const ModelCost& model, const RunResult& full, const RunResult& beacon,
                                  int32_t prompt_tokens) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  Reproduction r;
  r.modelled_full_gib = full.peak_total_bytes / kGiB;
  r.modelled_beacon_gib = beacon.peak_total_bytes / kGiB;
  r.modelled_full_gb = full.peak_total_bytes / 1e9;
  r.modelled_beacon_gb = beacon.peak_total_bytes / 1e9;
  r.kv_only_full_gb = full.peak_kv_bytes / 1e9;
  r.kv_only_beacon_gb = beacon.peak_kv_bytes / 1e9;
  r.modelled_full_tps = full.output_tokens_per_s;
  r.modelled_beacon_tps = beacon.output_tokens_per_s;
  r.full_error = r.modelled_full_gib / r.published_full_gb - 1;
  r.beacon_error = r.modelled_beacon_gib / r.published_beacon_gb - 1;
  r.within_5pct = std::abs(r.full_error) <= 0.05 && std::abs(r.beacon_error) <= 0.05;
  r.assumptions = {
      absl::StrFormat("peak memory = bf16 weights (%.2f GB = %.2f GiB) + the batch's peak KV cache (bf16, %.1f KiB "
                      "per token); runtime workspace and activations not counted",
                      model.weight_bytes() / 1e9, model.weight_bytes() / kGiB, model.kv_bytes_per_token() / 1024),
      std::string(kGbReadAsGib),
      absl::StrFormat("prompt %d tokens, kept whole (keep_prompt); BeaconKV bound = prompt + budget 2048 + interval "
                      "128; KV blocks of 16 slots",
                      prompt_tokens),
      "batch 16: 16 requests admitted at once, each generating 32,768 tokens (to length)",
      absl::StrFormat("not in the figures above: BeaconKV's per-sequence device state outside the KV pool (query "
                      "ring + FPS buffers, %.1f MB a sequence, %.2f GiB for the 16), which our CUDA engine also holds",
                      beacon.peak_policy_state_bytes / std::max(1, beacon.peak_running) / 1e6,
                      beacon.peak_policy_state_bytes / kGiB),
      std::string(kThroughputNote),
  };
  return r;
}

}  // namespace beacon::planner
