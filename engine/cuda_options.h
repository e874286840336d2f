// The CUDA backend's knobs, in a header that builds without CUDA so that the
// runtime and the command lines can carry them (engine/runtime.h,
// cli/device_flags.h); engine/cuda/cuda_backend.h consumes them.
#ifndef BEACON_ENGINE_CUDA_OPTIONS_H_
#define BEACON_ENGINE_CUDA_OPTIONS_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace beacon {

struct CudaBackendOptions {
  int device = 0;           // CUDA device ordinal ("--device cuda:N")
  bool cuda_graphs = true;  // replay captured graphs for all-decode steps (off: every step launched eagerly)
  int max_splits = 16;      // split-K partitions per (token, KV head) in decode attention
  // Decode attention's split kernel on tensor cores (kernels/cuda/decode_attention_mma.h)
  // for head_dim 64 and 128, instead of the CUDA-core kernel. Off until a GPU run
  // shows it faster on every shape (docs/cuda.md, "Decode attention on tensor cores").
  bool tensor_core_decode = false;
  // Decode attention by FlashInfer (kernels/flashinfer/decode.h;
  // flashinfer-python's headers, pinned): its CUDA-core decode kernel, or
  // with tensor_core_decode its tensor-core one, for models whose GQA group
  // and head_dim the kernel covers; refused at start otherwise, and in
  // builds without it. Prefill keeps our kernel. Off until a GPU run shows
  // it faster (docs/cuda.md, "Decode attention: ours or FlashInfer").
  bool flashinfer_decode = false;
  // Projections of at most 8 tokens (decode at batch 1-8) on kernels/cuda/gemv.h
  // instead of cuBLAS. Off until a GPU run shows it faster (docs/cuda.md).
  bool small_batch_gemv = false;
  // BeaconKV's eviction scoring (q . k of its recent and beacon queries with
  // every cached key) on tensor cores for head_dim 64 and 128, each query
  // split into two bf16 parts so the scores stay within the CPU policy's
  // tolerance (kernels/cuda/beacon_logit_tiles.cuh). On: the fp32 CUDA-core
  // products made an eviction compute-bound (docs/cuda.md); off keeps them.
  bool tensor_core_score = true;
  // The forward step's own kernels launched with programmatic dependent launch
  // (sm_90: the next kernel starts while the previous one finishes and waits
  // for it on the device; kernels/cuda/kernel_stream.h says why). Off until a
  // GPU run shows it faster (docs/cuda.md, "Launch gaps").
  bool programmatic_launch = false;

  // The limits of kernels/cuda/paged_attention.h (1 <= max_splits <= 1024);
  // INVALID_ARGUMENT naming the option.
  absl::Status Validate() const {
    if (device < 0) return absl::InvalidArgumentError(absl::StrCat("CUDA device ordinal ", device, " is negative"));
    if (max_splits < 1 || max_splits > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("cuda max_splits: ", max_splits, " is not in [1, 1024]"));
    }
    return absl::OkStatus();
  }
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_OPTIONS_H_
