// The device flags shared by beacon-serve and beacon-run: which device runs
// the model and the CUDA backend's knobs (engine/cuda_options.h), so that an
// operator can turn CUDA graphs off or bound split-K without a rebuild, as
// vLLM's --enforce-eager does.
#ifndef BEACON_CLI_DEVICE_FLAGS_H_
#define BEACON_CLI_DEVICE_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime.h"
#include "util/cli_args.h"

namespace beacon {

inline void DeclareDeviceFlags(cli::Args* args) {
  args->Declare("device", false, "cpu", "engine device: cpu, cuda (GPU 0) or cuda:N (bf16 weights and KV on the GPU)");
  args->Declare("cuda-graphs", true, "true",
                "replay CUDA graphs for all-decode steps (--no-cuda-graphs: every step launched eagerly)");
  args->Declare("cuda-max-splits", false, "16",
                "split-K partitions per token and KV head in decode attention (1-1024)");
  args->Declare("cuda-tensor-core-decode", true, "",
                "decode attention on tensor cores (head_dim 64 and 128; others keep the CUDA-core kernel)");
  args->Declare(
      "cuda-flashinfer-decode", true, "",
      "decode attention by FlashInfer's CUDA-core kernel (GQA groups 1-4, 6, 8, 16; head_dim 64, 128), or with "
      "--cuda-tensor-core-decode its tensor-core kernel (groups up to 16)");
  args->Declare("cuda-small-batch-gemv", true, "",
                "projections of at most 8 tokens on a matrix-vector kernel instead of cuBLAS");
  args->Declare("cuda-tensor-core-score", true, "true",
                "BeaconKV's eviction scoring on tensor cores for head_dim 64 and 128 (--no-cuda-tensor-core-score: "
                "fp32 CUDA-core products)");
  args->Declare("cuda-programmatic-launch", true, "",
                "the decode step's own kernels with programmatic dependent launch (sm_90: each starts while the "
                "previous one finishes)");
  args->Declare(
      "kv-cache-dtype", false, "auto",
      "KV cache element type: auto (= bf16), bf16, q8_0 (CPU only), f32 (CPU only; exact reference arithmetic)");
}

// Fills options->device and options->cuda; INVALID_ARGUMENT naming the flag.
inline absl::Status ParseDeviceFlags(const cli::Args& args, RuntimeOptions* options) {
  options->device = args.Str("device");
  int ordinal = options->cuda.device;
  if (absl::StatusOr<bool> cuda = ParseDeviceSpec(options->device, &ordinal); !cuda.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", cuda.status().message()));
  }
  options->cuda.cuda_graphs = args.Flag("cuda-graphs");
  options->cuda.tensor_core_decode = args.Flag("cuda-tensor-core-decode");
  options->cuda.flashinfer_decode = args.Flag("cuda-flashinfer-decode");
  options->cuda.small_batch_gemv = args.Flag("cuda-small-batch-gemv");
  options->cuda.tensor_core_score = args.Flag("cuda-tensor-core-score");
  options->cuda.programmatic_launch = args.Flag("cuda-programmatic-launch");
  absl::StatusOr<int64_t> splits = args.Int("cuda-max-splits");
  if (!splits.ok()) return splits.status();
  if (*splits < 1 || *splits > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--cuda-max-splits: ", *splits, " is not in [1, 1024]"));
  }
  options->cuda.max_splits = static_cast<int>(*splits);
  absl::StatusOr<DType> kv_dtype = ParseKvCacheDType(args.Str("kv-cache-dtype"));
  if (!kv_dtype.ok())
    return absl::InvalidArgumentError(absl::StrCat("--kv-cache-dtype: ", kv_dtype.status().message()));
  options->kv_cache_dtype = *kv_dtype;
  return absl::OkStatus();
}

}  // namespace beacon

#endif  // BEACON_CLI_DEVICE_FLAGS_H_
