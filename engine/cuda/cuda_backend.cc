#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/beacon_device_state.h"
#include "engine/cuda/cuda_status.h"
#include "engine/generation.h"
#include "kernels/cuda/sampling.h"

namespace beacon {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelWeights* weights,
                                                           const CudaBackendOptions& options) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(weights, options);
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const ModelWeights* weights,
                                                                 const CudaBackendOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "device \"cuda\": no usable CUDA device (", err != cudaSuccess ? cudaGetErrorString(err) : "none found", ")"));
  }
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CUDA device %d does not exist (%d visible)", options.device, count));
  }
  auto b = std::unique_ptr<CudaBackend>(new CudaBackend());
  if (absl::Status s = b->Init(weights, options); !s.ok()) return s;
  return b;
}

absl::Status CudaBackend::Init(const ModelWeights* weights, const CudaBackendOptions& options) {
  options_ = options;
  config_ = weights->config;
  model_ = PolicyInfoFor(config_);
  BEACON_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  cudaDeviceProp prop{};
  BEACON_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
  device_name_ = prop.name;
  BEACON_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  if (options_.flashinfer_decode) {
    if (absl::Status s = flashinfer_.Init(config_, options_.tensor_core_decode); !s.ok()) return s;
  }
  if (absl::Status s = gemm_.Init(stream_, options_.small_batch_gemv, options_.programmatic_launch); !s.ok()) return s;
  if (absl::Status s = weights_.Upload(*weights); !s.ok()) return s;
  // The CPU backend's RoPE table (scaled frequencies, attention factor),
  // uploaded, so both rotate alike; BeaconKV's scoring rotates with it too.
  const std::vector<float>& inv_freq = model_.rope.inv_freq;
  if (absl::Status s = inv_freq_.Allocate(inv_freq.size() * sizeof(float), "RoPE frequencies"); !s.ok()) return s;
  BEACON_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(inv_freq_.get(), inv_freq.data(), inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice));
  // A cudaMemcpy from pageable memory may return before its DMA lands, and
  // stream_ (non-blocking) does not wait for the legacy default stream: the
  // uploads above must be complete before the first kernel reads them.
  BEACON_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  evict_ctx_.stream = stream_;
  evict_ctx_.model = model_;
  evict_ctx_.rope.style = config_.rope_style;
  evict_ctx_.rope.theta = config_.rope_theta;
  evict_ctx_.rope.inv_freq = inv_freq_.as<float>();
  evict_ctx_.rope.attention_factor = model_.rope.attention_factor;
  evict_ctx_.score_kernel = options_.tensor_core_score ? BeaconScoreKernel::kMma : BeaconScoreKernel::kSimt;
  return absl::OkStatus();
}

CudaBackend::~CudaBackend() {
  DropGraphs();
  TimeSteps(false).IgnoreError();
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

absl::Status CudaBackend::TimeSteps(bool on) {
  if (!on) {
    if (step_begin_ != nullptr) cudaEventDestroy(step_begin_);
    if (step_end_ != nullptr) cudaEventDestroy(step_end_);
    step_begin_ = step_end_ = nullptr;
    return absl::OkStatus();
  }
  if (step_begin_ == nullptr) BEACON_CUDA_RETURN_IF_ERROR(cudaEventCreate(&step_begin_));
  if (step_end_ == nullptr) BEACON_CUDA_RETURN_IF_ERROR(cudaEventCreate(&step_end_));
  device_ms_total_ = 0;
  timed_steps_ = 0;
  return absl::OkStatus();
}

absl::Status CudaBackend::ReservePolicyStates(const KvPolicyOptions& options, int32_t max_sequences) {
  if (options.policy != KvPolicyKind::kBeacon) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<BeaconStatePool>> pool =
      BeaconStatePool::Create(BeaconDimsFor(options, model_), max_sequences);
  if (!pool.ok()) {
    return absl::Status(pool.status().code(),
                        absl::StrFormat("reserving BeaconKV policy state for %d sequences on %s: %s", max_sequences,
                                        device_name_, std::string(pool.status().message())));
  }
  evict_ctx_.beacon_pool = *std::move(pool);
  return ReserveEvictScratch(evict_ctx_.beacon_pool->dims());
}

absl::Status CudaBackend::ReserveEvictScratch(const BeaconDims& dims) {
  // A sequence holds at most one slot per position of the context, and no
  // more than its pool has.
  int64_t slots = config_.context_length > 0 ? config_.context_length : max_pool_slots_;
  if (max_pool_slots_ > 0) slots = std::min(slots, max_pool_slots_);
  slots = std::min<int64_t>(slots, std::numeric_limits<int32_t>::max());
  const int32_t block_size = min_block_size_ > 0 ? min_block_size_ : 1;
  EvictScratch* have = evict_ctx_.scratch.get();
  if (have != nullptr && have->dims == dims && have->max_slots >= slots && have->block_size <= block_size) {
    return absl::OkStatus();
  }
  auto scratch = std::make_shared<EvictScratch>();
  scratch->dims = dims;
  scratch->max_slots = static_cast<int32_t>(slots);
  scratch->block_size = block_size;
  evict_ctx_.scratch.reset();  // the old one goes first: both need not fit at once
  const size_t bytes = BeaconEvictScratchLayout::BytesForAtMost(dims, scratch->max_slots, block_size);
  if (absl::Status s = scratch->memory.Allocate(bytes, "the BeaconKV eviction scratch"); !s.ok()) {
    return absl::Status(s.code(), absl::StrFormat("reserving the BeaconKV eviction scratch for %d slots on %s: %s",
                                                  scratch->max_slots, device_name_, std::string(s.message())));
  }
  evict_ctx_.scratch = std::move(scratch);
  return absl::OkStatus();
}

size_t CudaBackend::reserved_policy_state_bytes() const {
  const BeaconStatePool* p = evict_ctx_.beacon_pool.get();
  const size_t states = p == nullptr ? 0 : p->state_bytes() * p->capacity();
  const EvictScratch* s = evict_ctx_.scratch.get();
  return states + (s == nullptr ? 0 : s->memory.bytes());
}

absl::StatusOr<std::unique_ptr<KvCache>> CudaBackend::MakeKvCache(const KvCacheShape& shape_in, int32_t num_blocks) {
  KvCacheShape shape = shape_in;
  shape.dtype = DType::kBF16;  // the device kernels' only KV type
  auto cache = std::make_unique<KvCache>(shape, num_blocks, KvStorage::kDevice);
  absl::StatusOr<std::unique_ptr<DeviceKvStorage>> storage = DeviceKvStorage::Create(shape, num_blocks, &evict_ctx_);
  if (!storage.ok()) {
    return absl::Status(storage.status().code(),
                        absl::StrFormat("cannot place a KV pool of %d blocks (%.1f GiB) on %s: %s", num_blocks,
                                        cache->BytesPerBlock() * static_cast<double>(num_blocks) / (1 << 30),
                                        device_name_, std::string(storage.status().message())));
  }
  cache->set_device_storage(std::move(*storage));
  max_pool_slots_ = std::max(max_pool_slots_, int64_t{num_blocks} * shape.block_size);
  min_block_size_ = min_block_size_ == 0 ? shape.block_size : std::min(min_block_size_, shape.block_size);
  if (evict_ctx_.scratch != nullptr) {
    if (absl::Status s = ReserveEvictScratch(evict_ctx_.scratch->dims); !s.ok()) return s;
  }
  return cache;
}

absl::StatusOr<Backend::DevicePool> CudaBackend::SizeKvPool(const KvCacheShape& shape, double fraction,
                                                            int64_t step_tokens, int64_t max_sequences) {
  if (!(fraction > 0 && fraction <= 1) || step_tokens < 1 || shape.block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sizing a KV pool: fraction %g must be in (0, 1], step tokens %d and block size %d positive",
                        fraction, step_tokens, shape.block_size));
  }
  if (absl::Status s = EnsureActivations(step_tokens, step_tokens); !s.ok()) return s;
  if (options_.flashinfer_decode) {  // a decode step has one token a sequence
    bool grew = false;
    const int64_t seqs = max_sequences > 0 ? std::min(max_sequences, step_tokens) : step_tokens;
    if (absl::Status s = flashinfer_.Reserve(config_, seqs, shape.block_size, &grew); !s.ok()) return s;
    if (grew) DropGraphs();
  }
  size_t free_bytes = 0, total_bytes = 0;
  BEACON_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  DevicePool out;
  out.total_bytes = total_bytes;
  out.in_use_bytes = total_bytes - free_bytes;
  const double allowed = fraction * static_cast<double>(total_bytes) - static_cast<double>(out.in_use_bytes);
  KvCacheShape bf16 = shape;
  bf16.dtype = DType::kBF16;
  const size_t per_block = DeviceKvStorage::BytesFor(bf16, 1);  // exact up to each array's 256-byte alignment
  int64_t blocks = allowed > 0 ? static_cast<int64_t>(allowed / static_cast<double>(per_block)) : 0;
  blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  while (blocks > 0 && static_cast<double>(DeviceKvStorage::BytesFor(bf16, blocks)) > allowed) --blocks;
  if (blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "--gpu-memory-utilization %g of %s's %.2f GiB leaves no room for a KV pool: %.2f GiB are in use already "
        "(weights, workspaces, step buffers, policy states); raise the fraction",
        fraction, device_name_, total_bytes / 1073741824.0, out.in_use_bytes / 1073741824.0));
  }
  out.slots = blocks * shape.block_size;
  out.pool_bytes = DeviceKvStorage::BytesFor(bf16, blocks);
  return out;
}

absl::Status CudaBackend::CheckPolicy(const KvPolicyOptions& o) const {
  if (o.policy == KvPolicyKind::kFull) return absl::OkStatus();
  if (o.policy != KvPolicyKind::kBeacon) {
    return absl::UnimplementedError(absl::StrCat("KV policy \"", std::string(o.policy_name()),
                                                 "\" does not run on the CUDA backend (full and beacon do)"));
  }
  if (o.beacon_filter != BeaconFilter::kAll) {
    return absl::UnimplementedError(
        "beacon_filter global does not run on the CUDA backend (it needs per-step attention probabilities)");
  }
  if (!o.beacon_bf16_state) {
    return absl::UnimplementedError(
        "beacon with an f32 policy state does not run on the CUDA backend (its ring and FPS buffers are bf16)");
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) {
  return Step(batch, Output::kLogits, {}, logits, nullptr);
}

absl::Status CudaBackend::ForwardGreedy(std::span<const ForwardEntry> batch, std::vector<int32_t>* tokens) {
  return Step(batch, Output::kGreedy, {}, nullptr, tokens);
}

absl::Status CudaBackend::ForwardSample(std::span<const ForwardEntry> batch, std::span<const EntrySampling> sampling,
                                        std::vector<int32_t>* tokens) {
  if (sampling.size() != batch.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d sampling entries for a batch of %d", sampling.size(), batch.size()));
  }
  return Step(batch, Output::kSample, sampling, nullptr, tokens);
}

absl::StatusOr<const DeviceKvStorage*> CudaBackend::CheckBatch(std::span<const ForwardEntry> batch,
                                                               Output output) const {
  const bool returns_tokens = output != Output::kLogits;
  if (absl::Status s = ValidateBatch(config_, batch, KvStorage::kDevice); !s.ok()) return s;
  const DeviceKvStorage* storage = nullptr;
  for (size_t e = 0; e < batch.size(); ++e) {
    const auto* d = dynamic_cast<const DeviceKvStorage*>(batch[e].kv->cache()->device_storage());
    if (d == nullptr || d->context() != &evict_ctx_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("batch entry %d: its KV cache was not made by this CUDA backend", e));
    }
    if (storage != nullptr && d != storage) {
      return absl::InvalidArgumentError("the entries of one CUDA step must share one KV cache");
    }
    storage = d;
    if (batch[e].policy != nullptr) {
      if (absl::Status s = CheckPolicy(batch[e].policy->options()); !s.ok()) return s;
    }
    if (returns_tokens && batch[e].all_logits) {
      return absl::InvalidArgumentError(
          absl::StrFormat("batch entry %d asks for all logits in a step that returns tokens", e));
    }
  }
  if (storage == nullptr) return absl::InvalidArgumentError("empty batch");
  return storage;
}

absl::Status CudaBackend::GroupObservers(std::span<const ForwardEntry> batch) {
  observe_.clear();
  groups_.clear();
  observe_states_.clear();
  struct Group {
    BeaconDims dims;
    std::vector<BeaconObserveEntry> entries;
    std::vector<BeaconDeviceState*> states;
  };
  std::vector<Group> by_dims;
  int64_t first = 0;
  for (const ForwardEntry& en : batch) {
    const int32_t n = static_cast<int32_t>(en.tokens.size());
    if (en.policy != nullptr && en.policy->options().policy == KvPolicyKind::kBeacon) {
      absl::StatusOr<BeaconDeviceState*> st = BeaconStateOf(en.policy, model_, stream_, evict_ctx_.beacon_pool);
      if (!st.ok()) return st.status();
      BeaconObserveEntry o;
      o.state = (*st)->data();
      o.first_token = static_cast<int32_t>(first);
      o.n_tokens = n;
      o.ring_count_before = (*st)->ring_count();
      o.fps_from_position = en.policy->options().beacon_prompt_queries ? 0 : en.policy->prompt_length();
      const BeaconDims& d = (*st)->dims();
      auto it = std::find_if(by_dims.begin(), by_dims.end(),
                             [&](const Group& g) { return std::memcmp(&g.dims, &d, sizeof(BeaconDims)) == 0; });
      if (it == by_dims.end()) {
        by_dims.push_back({d, {}, {}});
        it = by_dims.end() - 1;
      }
      it->entries.push_back(o);
      it->states.push_back(*st);
    }
    first += n;
  }
  for (const Group& g : by_dims) {
    groups_.push_back({g.dims, static_cast<int>(observe_.size()), static_cast<int>(g.entries.size())});
    observe_.insert(observe_.end(), g.entries.begin(), g.entries.end());
    observe_states_.insert(observe_states_.end(), g.states.begin(), g.states.end());
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Prepare(std::span<const ForwardEntry> batch, Output output, const PagedKv** kv) {
  absl::StatusOr<const DeviceKvStorage*> storage = CheckBatch(batch, output);
  if (!storage.ok()) return storage.status();
  *kv = &(*storage)->paged();
  if (absl::Status s = GroupObservers(batch); !s.ok()) return s;
  if (absl::Status s = ReserveBatch(batch); !s.ok()) return s;
  BuildForwardPlan(batch, &plan_, options_.flashinfer_decode ? (*kv)->layout.block_size : 0);
  return absl::OkStatus();
}

absl::Status CudaBackend::Step(std::span<const ForwardEntry> batch, Output output,
                               std::span<const EntrySampling> sampling, std::vector<float>* logits,
                               std::vector<int32_t>* tokens) {
  const bool returns_tokens = output != Output::kLogits;
  const PagedKv* kv = nullptr;
  if (absl::Status s = Prepare(batch, output, &kv); !s.ok()) return s;
  auto fail = [&](absl::Status s) {
    // Give back the slots reserved for this step; committed data is intact.
    for (const ForwardEntry& en : batch) en.kv->Truncate(en.kv->num_slots());
    return s;
  };
  if (absl::Status s =
          EnsureCapacity(plan_.n_tokens, plan_.n_rows, plan_.offsets.total, static_cast<int>(observe_.size()));
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = PlanObserve(); !s.ok()) return fail(s);
  const bool timed = step_begin_ != nullptr;
  if (timed) {
    if (absl::Status s = CudaStatus(cudaEventRecord(step_begin_, stream_), "timing the step"); !s.ok()) return fail(s);
  }
  // One upload of the plan (and the observe entries) through pinned memory.
  std::memcpy(meta_host_.get(), plan_.packed.data(), plan_.packed.size() * sizeof(int32_t));
  absl::Status s = CudaStatus(cudaMemcpyAsync(meta_.get(), meta_host_.get(), plan_.packed.size() * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, stream_),
                              "uploading the step plan");
  if (s.ok() && !observe_.empty()) {
    std::memcpy(observe_host_.get(), observe_.data(), observe_.size() * sizeof(BeaconObserveEntry));
    s = CudaStatus(cudaMemcpyAsync(observe_dev_.get(), observe_host_.get(),
                                   observe_.size() * sizeof(BeaconObserveEntry), cudaMemcpyHostToDevice, stream_),
                   "uploading BeaconKV entries");
  }
  if (s.ok() && output == Output::kSample) {
    auto* p = sampling_host_.as<DeviceSamplingParams>();
    for (size_t e = 0; e < sampling.size(); ++e) {
      p[e].temperature = sampling[e].temperature;
      p[e].top_k = sampling[e].top_k;
      p[e].top_p = sampling[e].top_p;
      p[e].min_p = sampling[e].min_p;
      p[e].seed = sampling[e].seed;
      p[e].step = sampling[e].step;
    }
    s = CudaStatus(cudaMemcpyAsync(sampling_dev_.get(), p, sampling.size() * sizeof(DeviceSamplingParams),
                                   cudaMemcpyHostToDevice, stream_),
                   "uploading sampling parameters");
  }
  masked_ = false;
  if (s.ok() && output == Output::kSample) {
    for (const EntrySampling& e : sampling) masked_ |= !e.allowed.empty();
    if (masked_) s = UploadMasks(sampling);
  }
  if (s.ok() && options_.flashinfer_decode && plan_.all_decode) {
    bool grew = false;
    s = flashinfer_.Plan(config_, plan_, stream_, &grew);
    if (grew) DropGraphs();
  }
  if (s.ok()) s = Launch(*kv, output);
  if (s.ok()) {
    if (returns_tokens) {
      s = CudaStatus(
          cudaMemcpyAsync(tokens_host_.get(), tokens_, plan_.n_rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_),
          "copying sampled ids");
    } else {
      logits->resize(plan_.n_rows * static_cast<size_t>(config_.vocab_size));
      s = CudaStatus(
          cudaMemcpyAsync(logits->data(), logits_, logits->size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
          "copying logits");
    }
  }
  if (s.ok() && timed) s = CudaStatus(cudaEventRecord(step_end_, stream_), "timing the step");
  if (s.ok()) s = CudaStatus(cudaStreamSynchronize(stream_), "running the forward step");
  if (!s.ok()) return fail(s);
  if (timed) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, step_begin_, step_end_) == cudaSuccess) {
      device_ms_total_ += ms;
      ++timed_steps_;
    }
  }
  if (returns_tokens) tokens->assign(tokens_host_.as<int32_t>(), tokens_host_.as<int32_t>() + plan_.n_rows);
  for (const ForwardEntry& en : batch) en.kv->CommitSlots(en.kv->num_slots() + static_cast<int32_t>(en.tokens.size()));
  for (size_t i = 0; i < observe_states_.size(); ++i) observe_states_[i]->Observed(observe_[i].n_tokens);
  return absl::OkStatus();
}

}  // namespace beacon
