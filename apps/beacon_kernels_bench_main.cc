// Google Benchmark micro-benchmarks of the CPU kernels at the default model's
// shapes (random weights), for tuning; whole-model figures come from
// beacon-bench. Reports weight bytes per second as "bytes_per_second".
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace beacon {
namespace {

std::vector<uint8_t> RandomBlocks(DType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> bytes(DTypeRowBytes(t, cols) * rows);
  std::mt19937 rng(1);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t bb = DTypeBlockBytes(t);
  for (size_t off = 0; off < bytes.size(); off += bb) {
    const uint16_t d = Fp32ToFp16(0.02f);
    __builtin_memcpy(&bytes[off], &d, 2);
    if (t == DType::kQ4_1) __builtin_memcpy(&bytes[off + 2], &d, 2);
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

void Args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int n : {1, 4, 16, 64}) b->Args({n, threads});
  }
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatMul, q4_1_ffn_up, DType::kQ4_1, 1536, 576)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMul, q4_1_ffn_down, DType::kQ4_1, 576, 1536)->Apply(Args);
BENCHMARK_CAPTURE(BM_MatMul, q8_0_logits, DType::kQ8_0, 49152, 576)->Apply(Args);

}  // namespace
}  // namespace beacon

BENCHMARK_MAIN();
