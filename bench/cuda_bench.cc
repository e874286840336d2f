#include "bench/cuda_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/generation.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kPrefillChunk = 2048;

absl::Status Cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

// One benchmark sequence: its slots, its compressor (null under full) and
// where it stands.
struct BenchSeq {
  std::unique_ptr<SequenceKv> kv;
  std::unique_ptr<SequenceCompressor> compressor;
  int32_t prompt = 0;
  int32_t position = 0;  // of the next token fed
  int32_t generated = 0;
  int32_t last = 0;  // token fed next
  KvPolicy* policy() const { return compressor != nullptr ? compressor->policy() : nullptr; }
};

absl::StatusOr<BenchSeq> NewSeq(Runtime* rt, KvCache* cache, const KvPolicyOptions& o, int32_t prompt) {
  BenchSeq s;
  s.kv = std::make_unique<SequenceKv>(cache);
  s.prompt = prompt;
  if (o.compresses()) {
    absl::StatusOr<std::unique_ptr<SequenceCompressor>> c =
        SequenceCompressor::Create(o, PolicyInfoFor(rt->config()), prompt);
    if (!c.ok()) return c.status();
    s.compressor = std::move(*c);
  }
  return s;
}

// Feeds `n` synthetic tokens at positions [start, start + n), in chunks.
absl::Status Prefill(Runtime* rt, BenchSeq* s, int32_t start, int32_t n, uint32_t salt) {
  const int32_t vocab = rt->config().vocab_size;
  std::vector<int32_t> ids;
  std::vector<int32_t> out;
  for (int32_t done = 0; done < n;) {
    const int32_t len = std::min(kPrefillChunk, n - done);
    ids.resize(len);
    for (int32_t i = 0; i < len; ++i) ids[i] = static_cast<int32_t>((salt * 131u + (done + i) * 31u + 7u) % vocab);
    ForwardEntry e{s->kv.get(), ids, start + done, false, s->policy()};
    if (absl::Status st = rt->backend()->ForwardGreedy(std::span(&e, 1), &out); !st.ok()) return st;
    s->last = out[0];
    done += len;
  }
  s->position = start + n;
  return absl::OkStatus();
}

// One greedy decode step of every sequence; then each compressor's turn.
absl::Status DecodeStep(Runtime* rt, std::vector<BenchSeq>& seqs, std::vector<int32_t>* out) {
  std::vector<ForwardEntry> entries;
  entries.reserve(seqs.size());
  for (BenchSeq& s : seqs) {
    entries.push_back(ForwardEntry{s.kv.get(), std::span<const int32_t>(&s.last, 1), s.position, false, s.policy()});
  }
  if (absl::Status st = rt->backend()->ForwardGreedy(entries, out); !st.ok()) return st;
  for (size_t i = 0; i < seqs.size(); ++i) {
    BenchSeq& s = seqs[i];
    s.last = (*out)[i];
    ++s.position;
    ++s.generated;
    if (s.compressor != nullptr) s.compressor->AfterDecodeStep(s.kv.get(), s.position);
  }
  return absl::OkStatus();
}

double KvReadBytes(const ModelConfig& c, int64_t slots) {
  return 2.0 * slots * c.n_layers * c.n_kv_heads * c.head_dim * 2;  // K and V, bf16
}

}  // namespace

absl::StatusOr<double> DeviceCopyBandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  if (absl::Status s = Cuda(cudaMalloc(&a, bytes), "cudaMalloc (bandwidth probe)"); !s.ok()) return s;
  if (absl::Status s = Cuda(cudaMalloc(&b, bytes), "cudaMalloc (bandwidth probe)"); !s.ok()) {
    cudaFree(a);
    return s;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemset(a, 1, bytes);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);  // warm-up
  const int reps = 10;
  cudaEventRecord(e0);
  for (int i = 0; i < reps; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  const absl::Status s = Cuda(cudaEventSynchronize(e1), "bandwidth probe");
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  if (!s.ok()) return s;
  return 2.0 * bytes * reps / (ms * 1e-3);
}

absl::StatusOr<CudaDecodeResult> BenchCudaDecode(Runtime* rt, int batch, int32_t context, int steps,
                                                 const KvPolicyOptions& policy, ProfileRanges* profile,
                                                 const std::string& label) {
  auto* cuda = dynamic_cast<CudaBackend*>(rt->backend());
  if (cuda == nullptr) return absl::FailedPreconditionError("the CUDA benchmarks need the CUDA backend");
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(int64_t{batch} * (context + steps + 48));
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  std::vector<BenchSeq> seqs;
  for (int b = 0; b < batch; ++b) {
    absl::StatusOr<BenchSeq> s = NewSeq(rt, cache.get(), policy, context);
    if (!s.ok()) return s.status();
    seqs.push_back(std::move(*s));
    if (absl::Status st = Prefill(rt, &seqs.back(), 0, context, b); !st.ok()) return st;
  }
  std::vector<int32_t> out;
  for (int i = 0; i < 3; ++i) {  // warm-up: graph capture, clocks
    if (absl::Status st = DecodeStep(rt, seqs, &out); !st.ok()) return st;
  }
  int64_t slots = 0;
  for (const BenchSeq& s : seqs) slots += s.kv->num_slots();
  if (absl::Status st = cuda->TimeSteps(true); !st.ok()) return st;
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (absl::Status st = DecodeStep(rt, seqs, &out); !st.ok()) return st;
  }
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  const double device_ms = cuda->timed_steps() > 0 ? cuda->device_ms_total() / cuda->timed_steps() : 0;
  if (absl::Status st = cuda->TimeSteps(false); !st.ok()) return st;
  if (profile != nullptr && profile->enabled()) {
    // A replayed graph, as in the timed steps; the profiler sees its kernels.
    if (absl::Status st = profile->Begin(label, cuda->stream()); !st.ok()) return st;
    if (absl::Status st = DecodeStep(rt, seqs, &out); !st.ok()) return st;
    if (absl::Status st = profile->End(); !st.ok()) return st;
  }
  int64_t slots_after = 0;
  for (BenchSeq& s : seqs) {
    slots_after += s.kv->num_slots();
    s.kv->Release();
  }
  CudaDecodeResult r;
  r.step_ms = sec / steps * 1e3;
  r.device_step_ms = device_ms;
  const double weight_bytes = static_cast<double>(cuda->weights().streamed_bytes());
  r.bytes_per_step = weight_bytes + KvReadBytes(rt->config(), (slots + slots_after) / 2);
  return r;
}

absl::StatusOr<EvictionCost> BenchEviction(Runtime* rt, const KvPolicyOptions& policy, int32_t slots,
                                           ProfileRanges* profile) {
  auto* cuda = dynamic_cast<CudaBackend*>(rt->backend());
  if (cuda == nullptr) return absl::FailedPreconditionError("the CUDA benchmarks need the CUDA backend");
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(slots + 64);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  absl::StatusOr<BenchSeq> s = NewSeq(rt, cache.get(), policy, /*prompt=*/16);
  if (!s.ok()) return s.status();
  double total = 0;
  const int reps = 3;
  for (int r = 0; r < reps; ++r) {
    const int32_t have = s->kv->num_slots();
    if (absl::Status st = Prefill(rt, &*s, s->position, slots - have, 7 + r); !st.ok()) return st;
    const bool profiled = profile != nullptr && r == reps - 1;
    if (profiled) {
      if (absl::Status st = profile->Begin("evict", cuda->stream()); !st.ok()) return st;
    }
    const auto t0 = Clock::now();
    s->compressor->Evict(s->kv.get(), s->position);
    total += std::chrono::duration<double>(Clock::now() - t0).count();
    if (profiled) {
      if (absl::Status st = profile->End(); !st.ok()) return st;
    }
    if (s->kv->num_slots() >= slots) return absl::InternalError("the eviction evicted nothing");
  }
  s->kv->Release();
  return EvictionCost{total / reps * 1e3, slots};
}

absl::StatusOr<ThroughputResult> BenchPoolThroughput(Runtime* rt, const KvPolicyOptions& policy, int64_t pool_tokens,
                                                     int32_t prompt, int32_t output, int steps) {
  const int bs = 16;
  const int64_t peak = SequenceCompressor::PeakSlots(policy, prompt, output);
  const int64_t peak_blocks = (peak + bs - 1) / bs;
  const int64_t pool_blocks = pool_tokens / bs;
  const int n = static_cast<int>(pool_blocks / peak_blocks);
  if (n < 1) return absl::InvalidArgumentError("the pool holds no sequence");
  absl::StatusOr<std::unique_ptr<KvCache>> made = rt->MakeKvCache(pool_blocks * bs, bs);
  if (!made.ok()) return made.status();
  std::unique_ptr<KvCache> cache = *std::move(made);
  std::vector<BenchSeq> seqs;
  // Steady state: sequence i has generated i/n of its output. A compressing
  // sequence past its budget holds bound + (generated - budget) % interval
  // slots, which is what it would hold had it generated them one by one.
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<BenchSeq> s = NewSeq(rt, cache.get(), policy, prompt);
    if (!s.ok()) return s.status();
    BenchSeq& q = *s;
    const int32_t g = static_cast<int32_t>(static_cast<int64_t>(i) * output / n);
    int32_t held = prompt + g;
    if (q.compressor != nullptr && held > q.compressor->bound()) {
      held = q.compressor->bound() + (held - q.compressor->bound()) % policy.interval;
    }
    if (absl::Status st = Prefill(rt, &q, prompt + g - held, held, i); !st.ok()) return st;
    q.generated = g;
    seqs.push_back(std::move(q));
  }
  auto* cuda = dynamic_cast<CudaBackend*>(rt->backend());
  const double weight_bytes = cuda != nullptr ? static_cast<double>(cuda->weights().streamed_bytes()) : 0.0;
  std::vector<int32_t> out;
  ThroughputResult r;
  r.concurrency = n;
  int64_t evictions_before = 0;
  for (const BenchSeq& s : seqs) evictions_before += s.compressor != nullptr ? s.compressor->evictions() : 0;
  int64_t evictions_retired = 0;
  uint32_t salt = 1000;
  const auto t0 = Clock::now();
  for (int step = 0; step < steps; ++step) {
    int64_t slots = 0;
    for (const BenchSeq& s : seqs) slots += s.kv->num_slots() + 1;  // + the token the step writes
    r.bytes_read += weight_bytes + KvReadBytes(rt->config(), slots);
    if (absl::Status st = DecodeStep(rt, seqs, &out); !st.ok()) return st;
    r.tokens += static_cast<int64_t>(seqs.size());
    for (BenchSeq& s : seqs) {
      if (s.generated < output) continue;
      // Finished: its blocks go back and a new request takes its place.
      if (s.compressor != nullptr) evictions_retired += s.compressor->evictions();
      s.kv->Release();
      absl::StatusOr<BenchSeq> fresh = NewSeq(rt, cache.get(), policy, prompt);
      if (!fresh.ok()) return fresh.status();
      s = std::move(*fresh);
      if (absl::Status st = Prefill(rt, &s, 0, prompt, salt++); !st.ok()) return st;
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  int64_t evictions_after = evictions_retired;
  for (BenchSeq& s : seqs) {
    evictions_after += s.compressor != nullptr ? s.compressor->evictions() : 0;
    s.kv->Release();
  }
  r.evictions = evictions_after - evictions_before;
  return r;
}

}  // namespace beacon
