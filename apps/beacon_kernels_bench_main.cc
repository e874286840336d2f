// Google Benchmark micro-benchmarks of the CPU kernels at the default model's
// shapes and the 1.5B model's (random weights), for tuning; whole-model figures come from
// beacon-bench. Reports weight bytes per second as "bytes_per_second".
//
//   beacon-kernels-bench [--benchmark_filter=REGEX] [--help]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/key_logits.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiled.h"
#include "kernels/cpu/packed_matrix.h"

namespace beacon {
namespace {

std::vector<uint8_t> RandomBlocks(DType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> bytes(DTypeRowBytes(t, cols) * rows);
  std::mt19937 rng(1);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  // Finite fp16 scales where each type keeps them (values do not matter for
  // speed, NaN/Inf would only make the output meaningless).
  const size_t bb = DTypeBlockBytes(t);
  const size_t d_off = t == DType::kQ2_K ? 80 : t == DType::kQ3_K ? 108 : t == DType::kQ6_K ? 208 : 0;
  for (size_t off = 0; off < bytes.size(); off += bb) {
    const uint16_t d = Fp32ToFp16(0.02f);
    __builtin_memcpy(&bytes[off + d_off], &d, 2);
    if (t == DType::kQ4_1 || t == DType::kQ5_1 || t == DType::kQ4_K || t == DType::kQ5_K) {
      __builtin_memcpy(&bytes[off + 2], &d, 2);
    }
  }
  return bytes;
}

void BM_MatMul(benchmark::State& state, DType t, int64_t rows, int64_t cols) {
  const int64_t n_tokens = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  std::vector<uint8_t> w = RandomBlocks(t, rows, cols);
  std::vector<float> x(n_tokens * cols, 0.5f), y(n_tokens * rows);
  ThreadPool pool(threads);
  QuantizedRows scratch;
  for (auto _ : state) {
    MatMul(MatrixView{t, rows, cols, w.data()}, x.data(), n_tokens, y.data(), &pool, &scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.size());
}

// The same through the 16-row packed layout the CPU backend uses (where
// this build has AVX-512 VNNI; otherwise identical to BM_MatMul).
void BM_MatMulPacked(benchmark::State& state, DType t, int64_t rows, int64_t cols) {
  const int64_t n_tokens = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  std::vector<uint8_t> w = RandomBlocks(t, rows, cols);
  std::unique_ptr<PackedMatrix> packed;
  if (PackedMatrix::Supported(t)) packed = PackedMatrix::Pack(t, rows, cols, w.data());
  std::vector<float> x(n_tokens * cols, 0.5f), y(n_tokens * rows);
  ThreadPool pool(threads);
  QuantizedRows scratch;
  for (auto _ : state) {
    MatMul(MatrixView{t, rows, cols, w.data(), packed.get()}, x.data(), n_tokens, y.data(), &pool, &scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * w.size());
}

// An eviction's scoring logits for one (layer, KV head) of the 1.5B model
// under BeaconKV's defaults of issue 34 (R = K = 16; since issue 45 R = 4,
// K = 8, a 16-row shape kept so results stay comparable): 6 query heads x
// (16 recent + 16 beacons) = 192 queries against 384 cached bf16 keys of d = 128, one
// 16-slot cache block at a time as kv/policy/attention_scoring.cc calls it. One
// thread; an eviction runs 28 x 2 of these on the pool. Reports MAC/s.
// kernel:0 is the register-tiled kernel, 1 key_logits.h's f32 one, 2 its
// bf16 one (vdpbf16ps, the queries rounded to bf16).
void BM_ScoringLogits(benchmark::State& state) {
  constexpr int64_t kQueries = 192, kSlots = 384, kD = 128, kBlock = 16;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> keys(kSlots * kD);
  for (auto& k : keys) k = Fp32ToBf16(nd(rng));
  std::vector<float> q(kQueries * kD), logits(kQueries * kSlots);
  for (float& v : q) v = nd(rng);
  const int kernel = static_cast<int>(state.range(0));
  const bool transposed = kernel == 1;
  if (transposed && !KeyBlockLogitsSupported(DType::kBF16, kD)) {
    state.SkipWithError("KeyBlockLogits needs AVX-512");
    return;
  }
  if (kernel == 2 && !KeyBlockLogitsBf16Supported(kD)) {
    state.SkipWithError("KeyBlockLogitsBf16 needs AVX-512 BF16");
    return;
  }
  std::vector<uint16_t> q_bf16(q.size());
  for (auto _ : state) {
    // The bf16 kernel's query rounding is part of its cost: once per call,
    // as kv/policy/attention_scoring.cc does it.
    if (kernel == 2) Fp32ToBf16Row(q.data(), kQueries * kD, q_bf16.data());
    for (int64_t s0 = 0; s0 < kSlots; s0 += kBlock) {
      if (kernel == 2) {
        KeyBlockLogitsBf16(keys.data() + s0 * kD, kBlock, kD, q_bf16.data(), kQueries, logits.data() + s0, kSlots);
      } else if (transposed) {
        KeyBlockLogits(DType::kBF16, keys.data() + s0 * kD, kBlock, kD, q.data(), kQueries, logits.data() + s0, kSlots);
      } else {
        MatMulRowsTiled(MatrixView{DType::kBF16, kBlock, kD, keys.data() + s0 * kD}, q.data(), kQueries, 0, kBlock,
                        logits.data() + s0, kSlots);
      }
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["MAC/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kQueries * kSlots * kD, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ScoringLogits)->ArgName("kernel")->Arg(0)->Arg(1)->Arg(2);

void Args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int n : {1, 2, 3, 4, 14, 16, 64}) b->Args({n, threads});
  }
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatMul, q4_1_ffn_up, DType::kQ4_1, 1536, 576)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMul, q4_1_ffn_down, DType::kQ4_1, 576, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMul, q8_0_logits, DType::kQ8_0, 49152, 576)->Apply(Args);
// The types of a Q4_K_M / Q5_K_M file of the default model (rows of 576 fall
// back to Q5_0 / Q5_1; ffn_down is Q4_K / Q5_K / Q6_K).
BENCHMARK_CAPTURE(BM_MatMulPacked, q8_0_logits, DType::kQ8_0, 49152, 576)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q4_1_ffn_up, DType::kQ4_1, 1536, 576)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q4_1_ffn_down, DType::kQ4_1, 576, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q5_0_ffn_down, DType::kQ5_0, 576, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q5_0_ffn_up, DType::kQ5_0, 1536, 576)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q5_1_ffn_up, DType::kQ5_1, 1536, 576)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q4_k_ffn_down, DType::kQ4_K, 576, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q5_k_ffn_down, DType::kQ5_K, 576, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, q6_k_ffn_down, DType::kQ6_K, 576, 1536)->Apply(Args);
// Qwen2.5-1.5B's Q4_K_M shapes (issue 34): hidden 1536, FFN 8960, vocabulary
// 151936. Each matrix is larger than the L2 cache, so these read DRAM as a
// decode step does (the output matrix alone is 191 MB of Q6_K).
BENCHMARK_CAPTURE(BM_MatMulPacked, qwen15b_q4_k_ffn_up, DType::kQ4_K, 8960, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, qwen15b_q4_k_ffn_down, DType::kQ4_K, 1536, 8960)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, qwen15b_q6_k_ffn_down, DType::kQ6_K, 1536, 8960)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMulPacked, qwen15b_q6_k_output, DType::kQ6_K, 151936, 1536)->Apply(Args);

// One decode step's attention for one KV head of the default model (3 query
// heads of 64) over n_keys cached slots in blocks of 16, with the
// probabilities a policy reads. bytes_per_second: K+V bytes read.
void BM_DecodeAttention(benchmark::State& state, DType t) {
  const int d = 64, g = 3, bs = 16;
  const int32_t n = static_cast<int32_t>(state.range(0));
  const int32_t blocks = (n + bs - 1) / bs;
  const size_t elems = static_cast<size_t>(blocks) * bs * d;
  std::vector<float> k32(elems), v32(elems);
  std::vector<uint16_t> k16(elems), v16(elems);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < elems; ++i) {
    k16[i] = Fp32ToBf16(k32[i] = nd(rng));
    v16[i] = Fp32ToBf16(v32[i] = nd(rng));
  }
  std::vector<int32_t> table(blocks);
  for (int32_t b = 0; b < blocks; ++b) table[b] = b;
  PagedHeadView view;
  view.k_head_base = t == DType::kF32 ? static_cast<const void*>(k32.data()) : k16.data();
  view.v_head_base = t == DType::kF32 ? static_cast<const void*>(v32.data()) : v16.data();
  view.block_stride = static_cast<size_t>(bs) * d;
  view.block_ids = table.data();
  view.block_size = bs;
  view.head_dim = d;
  view.dtype = t;
  std::vector<float> q(g * d), out(g * d), scores(static_cast<size_t>(g) * n);
  for (float& x : q) x = nd(rng);
  for (auto _ : state) {
    PagedAttention(q.data(), g, view, n, 0.125f, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t{2} * n * d * (t == DType::kF32 ? 4 : 2));
}

// The same over the default model's whole cache as a step reads it: 30
// layers x 3 KV heads in KvCache's layout ([block][head][slot][dim]), 47 MB
// at 2,048 bf16 slots, far past the caches: what DRAM adds to the kernel.
void BM_DecodeAttentionStep(benchmark::State& state, DType t) {
  const int d = 64, g = 3, bs = 16, heads = 3, layers = 30;
  const int32_t n = static_cast<int32_t>(state.range(0));
  const int32_t blocks = (n + bs - 1) / bs;
  const int eb = t == DType::kF32 ? 4 : 2;
  const size_t layer_bytes = static_cast<size_t>(blocks) * heads * bs * d * eb;
  std::vector<std::vector<uint8_t>> k(layers, std::vector<uint8_t>(layer_bytes)), v = k;
  std::mt19937 rng(1);
  for (auto& l : k) {
    for (size_t i = 0; i < l.size(); i += 2) l[i + 1] = static_cast<uint8_t>(0x3c + rng() % 3);  // finite values
  }
  for (auto& l : v) {
    for (size_t i = 0; i < l.size(); i += 2) l[i + 1] = static_cast<uint8_t>(0x3c + rng() % 3);
  }
  std::vector<int32_t> table(blocks);
  for (int32_t b = 0; b < blocks; ++b) table[b] = b;
  std::vector<float> q(g * d, 0.01f), out(g * d), scores(static_cast<size_t>(g) * n);
  for (auto _ : state) {
    for (int l = 0; l < layers; ++l) {
      for (int h = 0; h < heads; ++h) {
        PagedHeadView view;
        view.k_head_base = k[l].data() + static_cast<size_t>(h) * bs * d * eb;
        view.v_head_base = v[l].data() + static_cast<size_t>(h) * bs * d * eb;
        view.block_stride = static_cast<size_t>(heads) * bs * d;
        view.block_ids = table.data();
        view.block_size = bs;
        view.head_dim = d;
        view.dtype = t;
        PagedAttention(q.data(), g, view, n, 0.125f, scores.data(), out.data());
        benchmark::DoNotOptimize(out.data());
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * int64_t{2} * layers * heads * n * d * eb);
}

BENCHMARK_CAPTURE(BM_DecodeAttentionStep, f32, DType::kF32)->Arg(64)->Arg(2048)->Arg(4096);
BENCHMARK_CAPTURE(BM_DecodeAttentionStep, bf16, DType::kBF16)->Arg(64)->Arg(2048)->Arg(4096);
BENCHMARK_CAPTURE(BM_DecodeAttention, f32, DType::kF32)->Arg(64)->Arg(512)->Arg(2048)->Arg(4096);
BENCHMARK_CAPTURE(BM_DecodeAttention, bf16, DType::kBF16)->Arg(64)->Arg(512)->Arg(2048)->Arg(4096);

}  // namespace
}  // namespace beacon

// BENCHMARK_MAIN, with -h taken as --help as in the other beacon-* programs:
// the options are Google Benchmark's (--benchmark_filter=REGEX, ...), and
// --help prints them to stdout with exit status 0.
int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  static char help[] = "--help";
  for (char*& a : args) {
    if (std::strcmp(a, "-h") == 0) a = help;
  }
  benchmark::Initialize(&argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(argc, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
