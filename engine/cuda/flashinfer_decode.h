// FlashInfer's decode attention inside the CUDA backend
// (CudaBackendOptions::flashinfer_decode, --cuda-flashinfer-decode): its
// workspaces, the plan of each decode step and the launch of each layer
// (kernels/flashinfer/decode.h says what FlashInfer needs and why).
//
// Per decode step: the step's ForwardPlan carries the pages' CSR arrays
// (BuildForwardPlan with the cache's block size), uploaded with the rest of
// the plan; Plan() then runs FlashInfer's host planner on the lengths and
// enqueues the work list's copy, before the step's launches (or its graph's
// replay). Every layer's launch reads the same plan. Prefill and mixed steps
// keep our kernels.
//
// Which of FlashInfer's two kernels: its CUDA-core decode kernel, or with
// --cuda-tensor-core-decode its tensor-core one (the prefill kernel, one
// query a sequence), as vLLM's use_tensor_cores.
//
// Built without FlashInfer (no wheel at build time, or the CUDA emulator,
// which cannot run its PTX), Init() refuses the option at start, naming
// why, and nothing else here is reached.
#ifndef BEACON_ENGINE_CUDA_FLASHINFER_DECODE_H_
#define BEACON_ENGINE_CUDA_FLASHINFER_DECODE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/forward_plan.h"
#include "kernels/cuda/kernel_stream.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/flashinfer/decode.h"
#include "model/model_config.h"

namespace beacon {

class FlashInferDecoder {
 public:
  // OK when this build has FlashInfer and the chosen kernel covers the
  // model's attention (GQA group and head_dim); FAILED_PRECONDITION or
  // INVALID_ARGUMENT naming what is missing otherwise.
  absl::Status Init(const ModelConfig& c, bool tensor_cores);

  // Workspaces for decode batches of up to max_batch sequences, allocated
  // now (CudaBackend::SizeKvPool reserves them before it sizes the KV pool);
  // *grew says whether they were reallocated (captured graphs hold the old
  // addresses then).
  absl::Status Reserve(const ModelConfig& c, int64_t max_batch, int page_size, bool* grew);

  // Plans the decode step `plan` (all_decode, with pages), growing the
  // workspaces first when the batch outgrows them (*grew, as Reserve).
  absl::Status Plan(const ModelConfig& c, const ForwardPlan& plan, cudaStream_t stream, bool* grew);

  // One layer's decode attention as planned; `meta` is the plan's device copy.
  cudaError_t Launch(const PagedAttentionParams& a, const int32_t* meta, const ForwardPlan& plan,
                     KernelStream stream) const;

  // Distinguishes graphs whose launches were recorded under different
  // plan layouts (the same for every plan of one batch size; kept in the
  // graph key so that a change could never replay a stale layout).
  std::string GraphKeyPart() const;

 private:
  FlashInferKernel kernel_ = FlashInferKernel::kCudaCores;
  DeviceAllocation float_, int_;
  PinnedBuffer int_host_;
  int64_t cap_batch_ = 0;
  FlashInferDecodePlan plan_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_FLASHINFER_DECODE_H_
