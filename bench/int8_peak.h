// This machine's int8 dot-product peak, the roofline a batched decode step
// is judged against. At batch 1 a step reads every weight once and is bound
// by memory bandwidth (bandwidth.h); at batch 16-64 the same bytes feed 16-64
// tokens each and the step is bound by the integer dot products the
// quantised kernels issue (kernels/cpu/matmul_group.cc: u8 weights times s8
// activations, summed in int32). Issue 34 asks for 3x llama.cpp at batch 64;
// whether that is within reach is a question of this peak.
#ifndef BEACON_BENCH_INT8_PEAK_H_
#define BEACON_BENCH_INT8_PEAK_H_

#include <string>

#include "kernels/cpu/thread_pool.h"

namespace beacon {

struct Int8DotPeak {
  // Multiply-adds (u8 x s8 products summed into int32) per second over all of
  // the pool's threads, best of 5 rounds; 0 when the build has no SIMD
  // integer dot product (then there is no roofline to print).
  double macs_per_second = 0;
  // The instruction measured, as the kernels use it on this build: AVX-512
  // VNNI "vpdpbusd zmm", AVX-VNNI "vpdpbusd ymm", AVX2 "vpmaddubsw ymm"
  // (its int16 pair sums, as the AVX2 kernels issue them), else "none".
  std::string instruction;
};

// Runs independent chains of the build's widest integer dot product, held in
// registers, on every thread of the pool (chunks claimed as the kernels claim
// them, so a descheduled thread costs what it costs a decode step). About
// 0.5 s of CPU.
Int8DotPeak MeasureInt8DotPeak(ThreadPool* pool);

}  // namespace beacon

#endif  // BEACON_BENCH_INT8_PEAK_H_
