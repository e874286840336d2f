#include "kernels/cpu/packed_matrix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kernels/cpu/packed_group.h"

namespace beacon {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// The packed bytes of one matrix, zeroed. A matrix of 2 MiB or more starts
// on a 2 MiB boundary and its whole 2 MiB stretches go on transparent huge
// pages where the kernel allows it (THP "madvise" mode, as Debian ships it):
// a decode step streams every weight once, and on 4 KiB pages the TLB walks
// and the prefetchers' stop at each page boundary cost about a fifth of the
// read bandwidth (issue 34: 2 threads read 24 GB/s on 4 KiB pages, 30 GB/s on
// huge ones, on this project's Xeon machines). The tail past the last whole
// 2 MiB stays on 4 KiB pages, so no matrix is rounded up in resident memory
// (rounding every one of the 1.5B model's 86 such matrices would cost 66 MB).
// Where THP is off, madvise fails and the pages stay small: same bytes, slower.
uint8_t* AllocatePacked(size_t bytes) {
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : 64;  // 64: every packed q[] row is one aligned AVX-512 load
  void* p = nullptr;
  if (posix_memalign(&p, align, (bytes + 63) / 64 * 64) != 0) throw std::bad_alloc();  // as operator new would
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge) madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
  std::memset(p, 0, bytes);  // padding rows: zero weights, zero scales
  return static_cast<uint8_t*>(p);
}

}  // namespace

bool PackedMatrix::Supported(DType t) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  return IsQuantized(t);
#else
  return false;
#endif
}

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

std::unique_ptr<PackedMatrix> PackedMatrix::Pack(DType t, int64_t rows, int64_t cols, const void* data,
                                                 ThreadPool* pool) {
  auto pm = std::unique_ptr<PackedMatrix>(new PackedMatrix());
  pm->dtype_ = t;
  pm->rows_ = rows;
  pm->cols_ = cols;
  const bool grouped = HasGroupFormat(t);
  pm->group_bytes_ =
      grouped ? PackedGroupLayoutOf(t).sb_bytes * (cols / GroupFormatOf(t).group) : pm->n_blocks() * BlockBytes(t);
  const size_t total = pm->bytes();
  pm->data_.reset(AllocatePacked(total));
  if (grouped) {
    for (int64_t r = 0; r < rows; ++r)
      PackGroupRow(t, r, cols, data, pm->data_.get() + (r / kPackRows) * pm->group_bytes_);
    return pm;
  }
  const size_t row_bytes = DTypeRowBytes(t, cols);
  const int64_t nb = pm->n_blocks();
  const size_t bb = BlockBytes(t);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = r / kPackRows;
    const int l = static_cast<int>(r % kPackRows);
    const uint8_t* src_row = static_cast<const uint8_t*>(data) + row_bytes * r;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = pm->data_.get() + (g * nb + b) * bb;
      if (t == DType::kQ8_0) {
        BlockQ8_0 blk;
        std::memcpy(&blk, src_row + b * sizeof(BlockQ8_0), sizeof blk);
        int32_t sum = 0;
        for (int k = 0; k < 8; ++k) {
          for (int i = 0; i < 4; ++i) {
            dst[k * 64 + 4 * l + i] = static_cast<uint8_t>(blk.qs[4 * k + i]);
            sum += blk.qs[4 * k + i];
          }
        }
        std::memcpy(dst + 512 + 2 * l, &blk.d, 2);
        const int32_t c = -128 * sum;
        std::memcpy(dst + 544 + 4 * l, &c, 4);
      } else {
        uint16_t d, m;
        if (t == DType::kQ4_1) {
          BlockQ4_1 blk;
          std::memcpy(&blk, src_row + b * sizeof(BlockQ4_1), sizeof blk);
          d = blk.d;
          m = blk.m;
          for (int j = 0; j < 4; ++j) std::memcpy(dst + j * 64 + 4 * l, blk.qs + 4 * j, 4);
        } else {
          BlockQ4_0 blk;
          std::memcpy(&blk, src_row + b * sizeof(BlockQ4_0), sizeof blk);
          d = blk.d;
          // -8 d is exact in fp16 (a power-of-two scaling) below overflow.
          m = Fp32ToFp16(-8.0f * Fp16ToFp32(blk.d));
          for (int j = 0; j < 4; ++j) std::memcpy(dst + j * 64 + 4 * l, blk.qs + 4 * j, 4);
        }
        std::memcpy(dst + 256 + 2 * l, &d, 2);
        std::memcpy(dst + 288 + 2 * l, &m, 2);
      }
    }
  }
  return pm;
}

}  // namespace beacon
