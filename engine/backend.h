// The engine's compute backend: one forward pass over a ragged batch.
//
// A batch mixes sequences that prefill (many tokens, possibly one chunk of a
// longer prompt) and sequences that decode (one token). Each entry appends
// its tokens to its own paged KV sequence. CPU and CUDA implement this.
#ifndef BEACON_ENGINE_BACKEND_H_
#define BEACON_ENGINE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kv/policy/kv_policy.h"
#include "kv/store/kv_cache.h"
#include "model/model_config.h"

namespace beacon {

class ThreadPool;  // kernels/cpu/thread_pool.h

struct ForwardEntry {
  SequenceKv* kv = nullptr;         // the sequence's slots; tokens are appended
  std::span<const int32_t> tokens;  // new tokens, >= 1
  int32_t start_pos = 0;            // RoPE position of tokens[0]
  bool all_logits = false;          // logits for every token, not only the last
  // The sequence's KV policy, if it compresses: it is shown every token's
  // pre-RoPE queries and, on decode steps (one token), the attention
  // probabilities when it asks for them (kv/policy/kv_policy.h).
  KvPolicy* policy = nullptr;
};

// How ForwardSample draws an entry's next token (engine/sampler.h's filters
// without the penalties, which need the token history on the host).
struct EntrySampling {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;  // draw counter: tokens the sequence generated so far
  // A grammar's token mask for this draw (structured output,
  // engine/grammar/grammar_matcher.h: (vocab + 31) / 32 words, token t
  // allowed when bit t % 32 of word t / 32 is set); empty: no constraint.
  // Host memory, read during the call.
  std::span<const uint32_t> allowed;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs the model over `batch`. Appends each entry's K/V to its sequence
  // (reserving blocks as needed) and writes logits, row-major
  // [rows][vocab_size], rows in batch order: n_tokens rows for an entry with
  // all_logits, else one (its last token).
  // Errors (INVALID_ARGUMENT for a token id outside the vocabulary or a
  // position past the context; RESOURCE_EXHAUSTED when the KV pool cannot
  // hold the new slots) leave every sequence as it was.
  virtual absl::Status Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) = 0;

  // Forward, then the greedy token (argmax of the logits, ties to the lowest
  // id) of each entry's last row, into tokens[entry]. A device backend takes
  // the argmax where the logits are and copies back only the ids.
  // REQUIRES no entry has all_logits.
  virtual absl::Status ForwardGreedy(std::span<const ForwardEntry> batch, std::vector<int32_t>* tokens);

  // Whether ForwardSample draws where the logits are (no logits copy).
  virtual bool samples_on_device() const { return false; }
  // Forward, then one token per entry drawn by sampling[entry] from the
  // entry's last row, into tokens[entry]. Same (logits, seed, step), same
  // token. UNIMPLEMENTED unless samples_on_device().
  // REQUIRES sampling.size() == batch.size(), no entry has all_logits.
  virtual absl::Status ForwardSample(std::span<const ForwardEntry> batch, std::span<const EntrySampling> sampling,
                                     std::vector<int32_t>* tokens) {
    return absl::UnimplementedError("this backend samples on the host: call Forward");
  }

  // A KV cache of `num_blocks` blocks whose data this backend can read: host
  // f32 for the CPU, device bf16 for CUDA. RESOURCE_EXHAUSTED naming the
  // size and the device when the device cannot hold it.
  virtual absl::StatusOr<std::unique_ptr<KvCache>> MakeKvCache(const KvCacheShape& shape, int32_t num_blocks);

  // Whether sequences under `options` can run here: UNIMPLEMENTED naming the
  // policy (or option) when this backend cannot evict that way.
  virtual absl::Status CheckPolicy(const KvPolicyOptions& options) const { return absl::OkStatus(); }
  // Reserves, now, the device memory of `options`'s per-sequence policy
  // state for up to `max_sequences` sequences at once (CUDA: BeaconKV's
  // query ring and FPS buffers, taken by a step from the reservation rather
  // than allocated in it). A no-op where the policy keeps no device state.
  // RESOURCE_EXHAUSTED naming the bytes when the device cannot hold it.
  virtual absl::Status ReservePolicyStates(const KvPolicyOptions& options, int32_t max_sequences) {
    return absl::OkStatus();
  }
  // Bytes that reservation holds (0 where none).
  virtual size_t reserved_policy_state_bytes() const { return 0; }

  // Sizing a KV pool from a device's memory (beacon-serve
  // --gpu-memory-utilization, vLLM's option of that name). First reserves the
  // step buffers of the largest step, `step_tokens` tokens with as many
  // logits rows (they otherwise grow on demand), so that what the device
  // still has free is what the pool may take; then returns the most slots, a
  // multiple of shape.block_size, whose pool keeps the device's memory in use
  // within `fraction` of its total. Reserve policy states first: they count
  // as in use. UNIMPLEMENTED on a backend that keeps its KV on the host;
  // RESOURCE_EXHAUSTED naming the bytes when nothing is left for a block.
  struct DevicePool {
    int64_t slots = 0;
    size_t total_bytes = 0;   // the device's memory
    size_t in_use_bytes = 0;  // before the pool: weights, workspaces, step buffers, policy states
    size_t pool_bytes = 0;    // what `slots` take on the device
  };
  // `step_tokens` bounds a step's tokens (its buffers are reserved first) and
  // `max_sequences` a decode step's sequences (workspaces that grow with
  // them, such as FlashInfer's, are reserved for that many).
  virtual absl::StatusOr<DevicePool> SizeKvPool(const KvCacheShape& shape, double fraction, int64_t step_tokens,
                                                int64_t max_sequences);

  // "cpu" or "cuda".
  // The host CPU pool the backend computes on, or null (a device backend,
  // whose policies run on the device): compressors use it for host
  // evictions (SequenceCompressor::set_thread_pool).
  virtual ThreadPool* host_pool() const { return nullptr; }
  virtual std::string_view device() const = 0;
  virtual const ModelConfig& config() const = 0;
};

// The checks every backend makes before a step (INVALID_ARGUMENT naming the
// entry): a KV sequence and tokens per entry, a cache of the model's shape
// and of `storage`, no sequence twice, token ids inside the vocabulary,
// positions inside the context.
absl::Status ValidateBatch(const ModelConfig& config, std::span<const ForwardEntry> batch, KvStorage storage);

// Reserves every entry's new slots, all or nothing: on failure the entries
// reserved so far are rolled back and the error (RESOURCE_EXHAUSTED) returned.
absl::Status ReserveBatch(std::span<const ForwardEntry> batch);

}  // namespace beacon

#endif  // BEACON_ENGINE_BACKEND_H_
