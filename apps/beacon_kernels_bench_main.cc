// Google Benchmark micro-benchmarks of the CPU kernels at the default model's
// shapes (random weights), for tuning; whole-model figures come from
// beacon-bench. Reports weight bytes per second as "bytes_per_second".
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
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

void Args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int n : {1, 4, 16, 64}) b->Args({n, threads});
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

}  // namespace
}  // namespace beacon

BENCHMARK_MAIN();
