// This machine's memory bandwidth, the roofline a decode step is judged
// against: every weight byte is read once per step, so a step can be no
// faster than the weights' bytes over the bandwidth.
#ifndef BEACON_BENCH_BANDWIDTH_H_
#define BEACON_BENCH_BANDWIDTH_H_

#include <cstddef>

#include "kernels/cpu/thread_pool.h"

namespace beacon {

// STREAM-style copy of `bytes` over the pool's threads on ordinary (4 KiB)
// pages: bytes read + written per second, best of 5. The roofline
// docs/performance.md has always quoted.
double MeasureCopyBandwidth(ThreadPool* pool, size_t bytes);

// A read-only stream of `bytes` over the pool's threads, on transparent huge
// pages where the kernel grants them (as the CPU backend's packed weights
// are): bytes read per second, best of 5. What a decode step can reach at
// best, since it only reads weights; on 4 KiB pages TLB walks and the
// prefetchers' page-boundary stops make it lower.
double MeasureReadBandwidth(ThreadPool* pool, size_t bytes);

}  // namespace beacon

#endif  // BEACON_BENCH_BANDWIDTH_H_
