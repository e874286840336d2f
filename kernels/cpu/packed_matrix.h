// Quantised weight matrices repacked for 16-row integer dot products.
//
// The GGUF layout stores each row's blocks contiguously; a dot product per
// (row, block) then ends in a horizontal reduction and a scalar scale, ~15
// instructions per 32 weights. Repacked, one AVX-512 VNNI instruction
// (vpdpbusd) advances 16 rows by 4 weights each, and scales are applied to
// 16 rows at once: ~10x fewer instructions, so batch-1 decode is bound by
// memory bandwidth, not by the kernel.
//
// Layout: rows are taken in groups of 16 (the last group padded with zero
// rows); within a group, the blocks of 32 columns follow each other. For
// Q4_0/Q4_1 a packed block is 320 bytes:
//   uint8  q[4][64]   q[j][4 l + i] = byte 4j+i of row l's original qs[16]:
//                     its low nibble is element 4j+i, its high nibble element
//                     16+4j+i. So (q[j] & 15) holds elements 4j..4j+3 of all
//                     16 rows and (q[j] >> 4) elements 16+4j..16+4j+3.
//   fp16   d[16]      row scales
//   fp16   m[16]      row offsets: Q4_1 min, Q4_0 -8 d
// For Q8_0 a packed block is 608 bytes:
//   int8   q[8][64]   q[k][4 l + i] = element 4k+i of row l
//   fp16   d[16]
//   int32  c[16]      -128 * sum of row l's 32 values (the kernel multiplies
//                     activations offset by +128, as vpdpbusd wants one
//                     operand unsigned, and subtracts this back)
// The bytes per weight are those of the source type, so repacking costs
// memory traffic nothing; it is done once when the backend starts.
//
// The 5-bit types and the K-quants (kquant_blocks.h) are repacked from their
// integer form, in the same nibble order, per super-block of their group
// (packed_group.h has the byte layout): the nibble plane above, one 64-byte
// plane of masks per bit above the fourth, int8 sub-block scales and mins
// for the 16 rows, and the rows' f32 d and dmin after each super-block.
#ifndef BEACON_KERNELS_CPU_PACKED_MATRIX_H_
#define BEACON_KERNELS_CPU_PACKED_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace beacon {

inline constexpr int kPackRows = 16;

class PackedMatrix {
 public:
  // True when this build has the packed kernels (AVX-512 VNNI + BW) and
  // `t` is a type they handle (every quantised DType).
  static bool Supported(DType t);

  // Repacks a row-major matrix of a supported type. REQUIRES Supported(t),
  // cols % DTypeBlockElems(t) == 0.
  // `pool` (optional) repacks groups of 16 rows in parallel: the K-quants
  // decode every element on the way (a 7B model is ~7e9 of them).
  static std::unique_ptr<PackedMatrix> Pack(DType t, int64_t rows, int64_t cols, const void* data,
                                            ThreadPool* pool = nullptr);

  DType dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t n_groups() const { return (rows_ + kPackRows - 1) / kPackRows; }
  int64_t n_blocks() const { return cols_ / kQuantBlock; }
  // Bytes of one packed 32-column block (Q4_0, Q4_1, Q8_0 only).
  size_t block_bytes() const { return BlockBytes(dtype_); }
  const uint8_t* group(int64_t g) const { return data_.get() + g * group_bytes_; }
  size_t bytes() const { return n_groups() * group_bytes_; }
  size_t group_bytes() const { return group_bytes_; }

  static size_t BlockBytes(DType t) { return t == DType::kQ8_0 ? 608 : 320; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  DType dtype_ = DType::kQ4_1;
  int64_t rows_ = 0, cols_ = 0;
  size_t group_bytes_ = 0;  // one group of 16 rows, all columns
  std::unique_ptr<uint8_t, Free> data_;
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_PACKED_MATRIX_H_
