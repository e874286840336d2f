// The CUDA backend: the forward pass of the Llama/Qwen2/Qwen3 families on one
// GPU, behind the same Backend interface as the CPU one (engine/backend.h).
//
// - Weights: bf16 on the device (device_weights.h), fused QKV and gate/up
//   matrices; GEMMs on cuBLAS, bf16 in, fp32 accumulate (gemm.h).
// - Activations: bf16 residual stream; norms, RoPE, softmax in fp32 inside
//   the kernels (kernels/cuda/). Logits fp32.
// - KV: device bf16 pages of the host BlockPool's blocks (device_kv.h);
//   caches must come from this backend's MakeKvCache, and the entries of one
//   step must share one cache.
// - BeaconKV on the device: each beacon sequence's query ring and FPS
//   buffers live in GPU memory (beacon_device_state.h), updated inside the
//   step by LaunchBeaconObserve; eviction scores, selects and compacts on
//   the device (DeviceKvStorage::Evict). Only `full` and `beacon` (filter
//   all) run here: CheckPolicy refuses the others with UNIMPLEMENTED.
// - CUDA graphs: an all-decode step runs directly the first time a shape
//   (tokens, logits rows, block-table stride, BeaconKV groups, output kind)
//   is seen, is captured the second time and replayed after; the step's
//   metadata goes up in one copy to a fixed address before the replay
//   (forward_plan.h). Any buffer growth drops the graphs; a capture the CUDA
//   stack refuses turns graphs off with one message, never fails a step.
//
// Errors: the checks of ValidateBatch (INVALID_ARGUMENT), RESOURCE_EXHAUSTED
// from the pool, INTERNAL for a CUDA failure; in each case every sequence's
// slot count is as it was.
// Thread ownership: the engine thread (one stream).
#ifndef BEACON_ENGINE_CUDA_CUDA_BACKEND_H_
#define BEACON_ENGINE_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cuda/beacon_device_state.h"
#include "engine/cuda/device_kv.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/flashinfer_decode.h"
#include "engine/cuda/forward_plan.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda_options.h"
#include "kernels/cuda/beacon_state.h"
#include "kernels/cuda/kernel_stream.h"

namespace beacon {

class CudaBackend : public Backend {
 public:
  // Uploads `weights` (which must outlive the backend only until Create
  // returns: the device copy is independent). FAILED_PRECONDITION when no
  // CUDA device is usable.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const ModelWeights* weights,
                                                             const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  absl::Status Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) override;
  absl::Status ForwardGreedy(std::span<const ForwardEntry> batch, std::vector<int32_t>* tokens) override;
  bool samples_on_device() const override { return true; }
  // Device sampling (kernels/cuda/sampling.h): its draws are reproducible
  // per (seed, step) but are not the CPU sampler's draws.
  absl::Status ForwardSample(std::span<const ForwardEntry> batch, std::span<const EntrySampling> sampling,
                             std::vector<int32_t>* tokens) override;
  // RESOURCE_EXHAUSTED naming the pool's size and the device when the device
  // cannot hold it (a configuration error the caller reports at start-up).
  absl::StatusOr<std::unique_ptr<KvCache>> MakeKvCache(const KvCacheShape& shape, int32_t num_blocks) override;
  // cudaMemGetInfo after EnsureActivations(step_tokens, step_tokens); the
  // pool's bytes are DeviceKvStorage::BytesFor. What later grows on demand
  // (CUDA graphs, step metadata, sampling parameters, grammar masks: small)
  // comes out of the 1 - fraction left over.
  absl::StatusOr<DevicePool> SizeKvPool(const KvCacheShape& shape, double fraction, int64_t step_tokens,
                                        int64_t max_sequences) override;
  absl::Status CheckPolicy(const KvPolicyOptions& options) const override;
  // BeaconKV (any filter the backend runs): a BeaconStatePool of
  // max_sequences states of `options`'s dims, and the eviction scratch
  // (EvictScratch) for the most slots one sequence can hold:
  // min(context length, the largest pool MakeKvCache made; the context
  // length when none yet). A pool made afterwards that raises that bound
  // grows the scratch then, still outside any step. Other policies: nothing.
  absl::Status ReservePolicyStates(const KvPolicyOptions& options, int32_t max_sequences) override;
  // The states and the eviction scratch.
  size_t reserved_policy_state_bytes() const override;
  // The reservation (null before ReservePolicyStates), for tests.
  const BeaconStatePool* beacon_state_pool() const { return evict_ctx_.beacon_pool.get(); }
  const EvictScratch* evict_scratch() const { return evict_ctx_.scratch.get(); }
  std::string_view device() const override { return "cuda"; }
  const ModelConfig& config() const override { return config_; }

  // For benchmarks and tests.
  const DeviceWeights& weights() const { return weights_; }
  cudaStream_t stream() const { return stream_; }
  int64_t graphs_captured() const { return graphs_captured_; }
  int64_t graph_replays() const { return graph_replays_; }
  std::string device_name() const { return device_name_; }
  // Device time of each step, from a CUDA event before its uploads to one
  // after its read-back (so the host's share of a step, its validation,
  // plan building and synchronisation, is the wall time minus this).
  // Off by default: two event records a step. For benchmarks.
  absl::Status TimeSteps(bool on);
  double device_ms_total() const { return device_ms_total_; }
  int64_t timed_steps() const { return timed_steps_; }

 private:
  // One group of beacon sequences sharing dims: entries [offset, offset+count)
  // of the step's BeaconObserveEntry array.
  struct BeaconGroup {
    BeaconDims dims;
    int offset = 0;
    int count = 0;
  };

  // What a step hands back: every logits row, or one token per entry.
  enum class Output { kLogits, kGreedy, kSample };

  CudaBackend() = default;
  absl::Status Init(const ModelWeights* weights, const CudaBackendOptions& options);
  // Validation, reservation, plan and upload, then the kernels; the output
  // (logits or greedy ids) is copied to the host and the stream synchronised.
  // Grammar masks of a sampling step into masks_dev_ (rows without one: all ones).
  absl::Status UploadMasks(std::span<const EntrySampling> sampling);
  absl::Status Step(std::span<const ForwardEntry> batch, Output output, std::span<const EntrySampling> sampling,
                    std::vector<float>* logits, std::vector<int32_t>* tokens);
  // Step's first phase: CheckBatch, GroupObservers, then the batch's slots
  // reserved and plan_ built. *kv: the paged cache every entry shares.
  absl::Status Prepare(std::span<const ForwardEntry> batch, Output output, const PagedKv** kv);
  // ValidateBatch plus what this backend needs: every entry's cache made by
  // it (one cache per step), a policy it can run, no all_logits entry in a
  // step that returns tokens. Returns the shared storage.
  absl::StatusOr<const DeviceKvStorage*> CheckBatch(std::span<const ForwardEntry> batch, Output output) const;
  // Fills observe_, groups_ and observe_states_: the BeaconKV sequences'
  // device states, grouped by dims (one observe launch per group and layer).
  absl::Status GroupObservers(std::span<const ForwardEntry> batch);
  // Grows the capacity-sized buffers to the step's needs (dropping captured
  // graphs when a buffer moves): activations for n_tokens tokens and n_rows
  // output rows, the step metadata and the observe entries.
  absl::Status EnsureCapacity(int64_t n_tokens, int64_t n_rows, int64_t meta_ints, int n_observe);
  absl::Status EnsureActivations(int64_t n_tokens, int64_t n_rows);
  absl::Status EnsureMetadata(int64_t meta_ints);
  absl::Status EnsureObserveEntries(int n_observe);
  // Decode steps of at most kDeferredObserveTokens tokens observe every
  // layer in one launch after the last (LaunchBeaconObserveLayers), from each
  // layer's queries kept in observe_q_; longer steps (prefill chunks) observe
  // layer by layer from q_pre_. Sets defer_observe_ and grows observe_q_.
  static constexpr int64_t kDeferredObserveTokens = 128;
  absl::Status PlanObserve();
  // The kernel sequence of one step (cuda_forward.cc); capturable.
  absl::Status Enqueue(const PagedKv& kv, Output output);
  absl::Status Layer(int l, const PagedKv& kv);
  // BeaconKV's ring and FPS update of layers [first_layer, first_layer +
  // n_layers) for every group: group means first where a group's state is
  // group-shared, then one observe launch per group.
  absl::Status Observe(int first_layer, int n_layers);
  // Where layer l's pre-RoPE queries (and group means) go this step.
  float* ObserveQueries(int l) const;
  float* ObserveMeans(int l) const;
  // The forward step's own kernels' stream: programmatic dependent launch
  // when options_.programmatic_launch (kernels/cuda/kernel_stream.h).
  KernelStream step_stream() const { return KernelStream(stream_, options_.programmatic_launch); }
  // Runs Enqueue directly, or through a captured graph.
  absl::Status Launch(const PagedKv& kv, Output output);
  std::string GraphKey(const PagedKv& kv, Output output) const;
  void DropGraphs();
  // (Re)reserves evict_ctx_.scratch for `dims` if the slot bound or the dims
  // changed (ReservePolicyStates, MakeKvCache).
  absl::Status ReserveEvictScratch(const BeaconDims& dims);

  ModelConfig config_;
  PolicyModelInfo model_;
  CudaBackendOptions options_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  DeviceWeights weights_;
  Gemm gemm_;
  DeviceAllocation inv_freq_;
  EvictContext evict_ctx_;
  // Over the KV pools made so far: the most slots and the smallest block
  // size (the eviction scratch's block table is sized with it).
  int64_t max_pool_slots_ = 0;
  int32_t min_block_size_ = 0;

  // The step being run.
  ForwardPlan plan_;
  std::vector<BeaconObserveEntry> observe_;
  std::vector<BeaconGroup> groups_;
  std::vector<BeaconDeviceState*> observe_states_;

  // Capacity-sized device buffers (activations, metadata), re-carved on growth.
  int64_t cap_tokens_ = 0, cap_rows_ = 0, cap_meta_ = 0;
  int cap_observe_ = 0;
  DeviceAllocation activations_;
  __nv_bfloat16 *resid_ = nullptr, *xb_ = nullptr, *qkv_ = nullptr, *att_ = nullptr, *proj_ = nullptr,
                *gate_up_ = nullptr, *ffn_ = nullptr, *rows_ = nullptr;
  float *q_pre_ = nullptr, *q_mean_ = nullptr, *logits_ = nullptr;  // q_mean_: group means (beacon_group_queries)
  int32_t* tokens_ = nullptr;
  void* attn_workspace_ = nullptr;
  FlashInferDecoder flashinfer_;  // options_.flashinfer_decode: its workspaces and the step's plan
  DeviceAllocation meta_;         // ForwardPlan::packed
  DeviceAllocation observe_dev_;
  // Deferred observation: [n_layers][cap_observe_q_][q_dim] f32 queries, then
  // [n_layers][cap_observe_q_][kv_dim] group means; a layer's rows start at
  // l * n_tokens * width, so the layers lie back to back.
  DeviceAllocation observe_q_;
  int64_t cap_observe_q_ = 0;
  bool defer_observe_ = false;
  DeviceAllocation sampling_dev_;  // DeviceSamplingParams [cap_rows_] + sampling workspace
  // Grammar masks of a step whose draws are constrained: [cap_rows_][words],
  // an unconstrained row all ones (kernels/cuda/token_bitmask.h). Allocated
  // at the first such step; `masked_` says whether this step applies them.
  DeviceAllocation masks_dev_;
  PinnedBuffer masks_host_;
  int64_t cap_mask_rows_ = 0;
  bool masked_ = false;
  size_t sampling_workspace_bytes_ = 0;
  PinnedBuffer meta_host_, observe_host_, tokens_host_, sampling_host_;

  std::map<std::string, cudaGraphExec_t> graphs_;
  std::set<std::string> seen_shapes_;  // run once directly, captured on the second step
  int64_t graphs_captured_ = 0, graph_replays_ = 0;

  // TimeSteps: events around a step's device work, and their running sum.
  cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;
  double device_ms_total_ = 0;
  int64_t timed_steps_ = 0;
};

// Runtime's entry point (engine/runtime.cc).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelWeights* weights,
                                                           const CudaBackendOptions& options);

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_CUDA_BACKEND_H_
