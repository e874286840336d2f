#include "engine/cuda/flashinfer_decode.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_status.h"

namespace beacon {

absl::Status FlashInferDecoder::Init(const ModelConfig& c, bool tensor_cores) {
#ifndef BEACON_HAVE_FLASHINFER
  (void)c, (void)tensor_cores;
  return absl::FailedPreconditionError(
      "--cuda-flashinfer-decode: this build has no FlashInfer (its wheel was missing when the build was "
      "configured: run tools/bootstrap.sh run, then rebuild; the CUDA emulator never has it)");
#else
  kernel_ = tensor_cores ? FlashInferKernel::kTensorCores : FlashInferKernel::kCudaCores;
  if (!FlashInferDecodeSupports(kernel_, c.n_heads, c.n_kv_heads, c.head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cuda-flashinfer-decode: FlashInfer's ",
        tensor_cores ? "tensor-core decode (with --cuda-tensor-core-decode) covers GQA groups up to 16"
                     : "CUDA-core decode covers GQA groups 1, 2, 3, 4, 6, 8 and 16 (add --cuda-tensor-core-decode "
                       "for its tensor-core kernel, up to 16)",
        " at head_dim 64 and 128; this model has ", c.n_heads, " query heads on ", c.n_kv_heads,
        " KV heads at head_dim ", c.head_dim));
  }
  return absl::OkStatus();
#endif
}

absl::Status FlashInferDecoder::Reserve(const ModelConfig& c, int64_t max_batch, int page_size, bool* grew) {
  *grew = false;
#ifndef BEACON_HAVE_FLASHINFER
  (void)max_batch, (void)page_size;
  return Init(c, false);
#else
  if (max_batch <= cap_batch_) return absl::OkStatus();
  // Grown in steps of two, so a growing batch re-captures its graphs a few
  // times, not at every new size.
  const int64_t cap = std::max<int64_t>({max_batch, 2 * cap_batch_, 64});
  size_t float_bytes = 0, int_bytes = 0;
  BEACON_CUDA_RETURN_IF_ERROR(FlashInferDecodeWorkspaceBytes(kernel_, static_cast<int>(cap), c.n_heads, c.n_kv_heads,
                                                             c.head_dim, page_size, &float_bytes, &int_bytes));
  *grew = true;  // from here the old buffers are gone, whatever follows
  if (absl::Status s = float_.Allocate(float_bytes, "FlashInfer's partial outputs"); !s.ok()) return s;
  if (absl::Status s = int_.Allocate(int_bytes, "FlashInfer's work list"); !s.ok()) return s;
  if (absl::Status s = int_host_.Reserve(int_bytes, "FlashInfer's work list"); !s.ok()) return s;
  cap_batch_ = cap;
  return absl::OkStatus();
#endif
}

absl::Status FlashInferDecoder::Plan(const ModelConfig& c, const ForwardPlan& plan, cudaStream_t stream, bool* grew) {
  *grew = false;
#ifndef BEACON_HAVE_FLASHINFER
  (void)plan, (void)stream;
  return Init(c, false);
#else
  const int batch = static_cast<int>(plan.n_seqs);
  if (!plan.all_decode || plan.page_size <= 0 || batch != plan.n_tokens) {
    return absl::InternalError("FlashInfer decode planned for a step that is not one token a sequence with pages");
  }
  if (absl::Status s = Reserve(c, batch, plan.page_size, grew); !s.ok()) return s;
  const FlashInferDecodeWorkspace ws{float_.get(), float_.bytes(), int_.get(), int_host_.get(), int_.bytes()};
  const int32_t* indptr = plan.packed.data() + plan.offsets.pages_indptr;
  // The copy it enqueues reads int_host_ when the stream reaches it; the
  // backend synchronises each step before the next plan rewrites it.
  return CudaStatus(FlashInferDecodePlanStep(kernel_, indptr, batch, c.n_heads, c.n_kv_heads, c.head_dim,
                                             plan.page_size, ws, &plan_, stream),
                    "planning FlashInfer's decode");
#endif
}

cudaError_t FlashInferDecoder::Launch(const PagedAttentionParams& a, const int32_t* meta, const ForwardPlan& plan,
                                      KernelStream stream) const {
#ifndef BEACON_HAVE_FLASHINFER
  (void)a, (void)meta, (void)plan, (void)stream;
  return cudaErrorInvalidValue;  // unreachable: Init() refused the option at start
#else
  const FlashInferPages pages{meta + plan.offsets.pages_indptr, meta + plan.offsets.pages_indices,
                              meta + plan.offsets.pages_last, meta + plan.offsets.pages_qo};
  const FlashInferDecodeWorkspace ws{float_.get(), float_.bytes(), int_.get(), int_host_.get(), int_.bytes()};
  return LaunchFlashInferDecode(a, pages, plan_, ws, stream);
#endif
}

std::string FlashInferDecoder::GraphKeyPart() const {
  return absl::StrFormat("|fi%d,%d,%d", static_cast<int>(plan_.kernel), plan_.padded_batch_size(),
                         plan_.split_kv() ? 1 : 0);
}

}  // namespace beacon
