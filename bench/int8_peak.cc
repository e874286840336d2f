#include "bench/int8_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReps = 5;
constexpr int64_t kChunks = 256;
// Iterations of the 12-instruction body per chunk: about 0.2-0.5 ms of one
// core, long enough that claiming a chunk costs nothing beside it.
constexpr int64_t kItersPerChunk = 1 << 16;
// Twelve independent accumulators: more than latency x throughput of any of
// the instructions below (vpdpbusd: latency 4-5 cycles, 1-2 a cycle), so the
// loop runs at the instruction's throughput.
constexpr int kChains = 12;

// The twelve chains are named variables, not an array: an array's elements
// went through memory (a store-to-load chain per instruction) in an early
// version and measured half the rate.
#define BEACON_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
constexpr const char* kInstruction = "vpdpbusd zmm";
constexpr double kMacsPerInstruction = 64;
int64_t Chunk(int64_t iters) {
#define DECL(i) __m512i a##i = _mm512_set1_epi32(i);
#define STEP(i) a##i = _mm512_dpbusd_epi32(a##i, w, x);
#define SUM(i) s = _mm512_add_epi32(s, a##i);
  BEACON_CHAINS(DECL)
  __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
  for (int64_t it = 0; it < iters; ++it) {
    BEACON_CHAINS(STEP)
    // Opaque to the compiler: the products cannot be hoisted or folded.
    __asm__ volatile("" : "+v"(w), "+v"(x));
  }
  __m512i s = _mm512_setzero_si512();
  BEACON_CHAINS(SUM)
  // Stored and summed by hand: GCC 12 warns (maybe-uninitialized) inside
  // _mm512_reduce_add_epi32's header code.
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  int64_t total = 0;
  for (int32_t v : lanes) total += v;
  return total;
}
#elif defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
constexpr const char* kInstruction = "vpdpbusd ymm";
constexpr double kMacsPerInstruction = 32;
int64_t Chunk(int64_t iters) {
#define DECL(i) __m256i a##i = _mm256_set1_epi32(i);
#define STEP(i) a##i = _mm256_dpbusd_epi32(a##i, w, x);
#define SUM(i) s = _mm256_add_epi32(s, a##i);
  BEACON_CHAINS(DECL)
  __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(5);
  for (int64_t it = 0; it < iters; ++it) {
    BEACON_CHAINS(STEP)
    __asm__ volatile("" : "+x"(w), "+x"(x));
  }
  __m256i s = _mm256_setzero_si256();
  BEACON_CHAINS(SUM)
  return _mm256_extract_epi32(s, 0) + _mm256_extract_epi32(s, 7);
}
#elif defined(__AVX2__)
constexpr const char* kInstruction = "vpmaddubsw ymm";
constexpr double kMacsPerInstruction = 32;
int64_t Chunk(int64_t iters) {
  // vpmaddubsw alone (the pair sums the AVX2 kernels then widen with one
  // vpmaddwd per 32 products): the upper bound of that path. Saturating
  // int16 sums of small products never saturate here.
#define DECL(i) __m256i a##i = _mm256_set1_epi16(i);
#define STEP(i) a##i = _mm256_add_epi16(a##i, _mm256_maddubs_epi16(w, x));
#define SUM(i) s = _mm256_add_epi16(s, a##i);
  BEACON_CHAINS(DECL)
  __m256i w = _mm256_set1_epi8(1), x = _mm256_set1_epi8(0);
  for (int64_t it = 0; it < iters; ++it) {
    BEACON_CHAINS(STEP)
    __asm__ volatile("" : "+x"(w), "+x"(x));
  }
  __m256i s = _mm256_setzero_si256();
  BEACON_CHAINS(SUM)
  return _mm256_extract_epi16(s, 0);
}
#else
constexpr const char* kInstruction = "none";
constexpr double kMacsPerInstruction = 0;
int64_t Chunk(int64_t) { return 0; }
#endif
#undef DECL
#undef STEP
#undef SUM
#undef BEACON_CHAINS

}  // namespace

Int8DotPeak MeasureInt8DotPeak(ThreadPool* pool) {
  Int8DotPeak peak;
  peak.instruction = kInstruction;
  if (kMacsPerInstruction == 0) return peak;
  std::atomic<int64_t> sink{0};
  for (int rep = 0; rep < kReps; ++rep) {
    const auto t0 = Clock::now();
    pool->ParallelFor(kChunks, 1, [&](int64_t begin, int64_t end, int) {
      int64_t s = 0;
      for (int64_t c = begin; c < end; ++c) s += Chunk(kItersPerChunk);
      sink.fetch_add(s, std::memory_order_relaxed);  // keeps the sums observable
    });
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    const double macs = static_cast<double>(kChunks) * kItersPerChunk * kChains * kMacsPerInstruction;
    peak.macs_per_second = std::max(peak.macs_per_second, macs / sec);
  }
  if (sink.load() == 42) peak.macs_per_second += 1;  // never true in practice; the sink stays live
  return peak;
}

}  // namespace beacon
