#include "apps/serve_kv_pool.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "kv/serving/kv_policy_limits.h"
#include "util/log.h"

namespace beacon {
namespace {

constexpr double kGiB = 1073741824.0;

// Reserves BeaconKV's device state for max_running sequences and its
// eviction scratch, if requests may run beacon. The dims are those a beacon
// request resolves to (requests choose policy and budget only). A no-op on
// the CPU backend.
absl::Status ReserveBeaconStates(Backend* backend, const ServeLimits& limits, int32_t max_running) {
  absl::StatusOr<KvPolicyOptions> beacon =
      ResolveRequestKvOptions(limits.kv_default, limits.kv_limits, std::string("beacon"), std::nullopt);
  if (!beacon.ok()) return absl::OkStatus();  // beacon is not allowed: nothing to hold
  if (absl::Status s = backend->ReservePolicyStates(*beacon, max_running); !s.ok()) return s;
  if (backend->reserved_policy_state_bytes() > 0) {
    logging::Info("reserved %.1f MiB of device memory for the BeaconKV state of %d sequences and its eviction scratch",
                  backend->reserved_policy_state_bytes() / 1048576.0, max_running);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> ParseGpuMemoryUtilization(const cli::Args& args, const std::string& device) {
  if (!args.Has("gpu-memory-utilization") || args.Str("gpu-memory-utilization").empty()) return 0.0;
  absl::StatusOr<double> f = args.Double("gpu-memory-utilization");
  if (!f.ok()) return f.status();
  if (!(*f > 0 && *f <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu-memory-utilization: ", *f, " is not in (0, 1]"));
  }
  if (device.rfind("cuda", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu-memory-utilization sizes the KV pool from a GPU's memory; "
                     "--device ",
                     device, " keeps it in host memory: give --kv-pool-tokens"));
  }
  if (args.Has("kv-pool-tokens")) {
    return absl::InvalidArgumentError("--gpu-memory-utilization and --kv-pool-tokens both size the KV pool: give one");
  }
  return *f;
}

absl::StatusOr<std::unique_ptr<KvCache>> MakeServeKvPool(Runtime* runtime, const ServeLimits& limits,
                                                         const KvPoolConfig& pool) {
  Backend* backend = runtime->backend();
  if (pool.device_share <= 0) {
    absl::StatusOr<std::unique_ptr<KvCache>> cache = runtime->MakeKvCache(pool.tokens, pool.block_size);
    if (!cache.ok()) return cache.status();
    if (absl::Status s = ReserveBeaconStates(backend, limits, pool.max_running); !s.ok()) return s;
    return cache;
  }
  // The state first: its eviction scratch is sized for the context length
  // (the most slots a sequence can hold), which no pool made afterwards raises.
  if (absl::Status s = ReserveBeaconStates(backend, limits, pool.max_running); !s.ok()) return s;
  absl::StatusOr<Backend::DevicePool> sized =
      runtime->SizeKvPool(pool.device_share, pool.step_tokens, pool.max_running, pool.block_size);
  if (!sized.ok()) return sized.status();
  logging::Info(
      "KV pool from --gpu-memory-utilization %g: %.2f GiB of the device's %.2f GiB, %.2f GiB of it in use before "
      "the pool (weights, workspaces, the buffers of a %d-token step, policy state): %lld slots, %.2f GiB",
      pool.device_share, pool.device_share * sized->total_bytes / kGiB, sized->total_bytes / kGiB,
      sized->in_use_bytes / kGiB, pool.step_tokens, static_cast<long long>(sized->slots), sized->pool_bytes / kGiB);
  return runtime->MakeKvCache(sized->slots, pool.block_size);
}

}  // namespace beacon
