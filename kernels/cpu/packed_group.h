// The packed layout of the group-format types (Q5_0, Q5_1, Q2_K..Q6_K) for
// the 16-row integer kernel (internal to kernels/cpu; PackedMatrix owns the
// bytes, matmul_group.cc reads them).
//
// A group of 16 rows holds, per super-block of its type (256 columns for the
// K-quants, 32 for Q5_0/Q5_1), `blocks` packed 32-column blocks and then a
// trailer:
//   block:   uint8  q[4][64]        nibbles as packed_matrix.h's Q4 layout:
//                                   q[j][4l + i] low = u of element 4j+i of
//                                   row l, high = element 16+4j+i
//            uint64 mask[hbits][8]  bit (4l + i) of mask[p][k] = bit 4+p of
//                                   u of element E(k)+i of row l, where
//                                   E(k) = 4k (k < 4), 16 + 4(k-4) (k >= 4):
//                                   the byte order of the unpacked nibbles
//            int8   sc[n_sc][16]    sub-block scale of each row (n_sc = 2:
//                                   elements 0-15, then 16-31)
//            int8   mn[n_mn][16]    sub-block min, likewise
//   trailer: f32    d[16]           the rows' super-block d
//            f32    dmin[16]        (types with a min only)
// Scales are kept as the integers of the source (not premultiplied by d) so
// the weights cost 4.75 (Q4_K) to 6.6 (Q6_K) bits each, close to the file's.
#ifndef BEACON_KERNELS_CPU_PACKED_GROUP_H_
#define BEACON_KERNELS_CPU_PACKED_GROUP_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kquant_blocks.h"

namespace beacon {

struct PackedGroupLayout {
  int blocks = 0;  // 32-column blocks per super-block
  int hbits = 0;   // mask planes: bits of u above the nibble
  int n_sc = 0;    // 0 (sc = 1), 1 (one per 32), 2 (one per 16)
  int n_mn = 0;    // 0 (none, or mn = 1 for Q5_1), 1, 2
  bool dmin = false;
  size_t block_bytes = 0;
  size_t sb_bytes = 0;  // blocks * block_bytes + trailer

  constexpr size_t mask_off() const { return 256; }
  constexpr size_t sc_off() const { return 256 + 64 * static_cast<size_t>(hbits); }
  constexpr size_t mn_off() const { return sc_off() + 16 * static_cast<size_t>(n_sc); }
  constexpr size_t d_off() const { return static_cast<size_t>(blocks) * block_bytes; }
  constexpr size_t dmin_off() const { return d_off() + 64; }
};

constexpr PackedGroupLayout MakePackedGroupLayout(const QuantGroupFormat& f) {
  PackedGroupLayout l;
  l.blocks = f.group / 32;
  l.hbits = f.bits > 4 ? f.bits - 4 : 0;
  l.n_sc = f.scales ? (f.sc16 ? 2 : 1) : 0;
  l.n_mn = f.mins == 1 ? (f.mn16 ? 2 : 1) : 0;
  l.dmin = f.mins != 0;
  l.block_bytes = 256 + 64 * static_cast<size_t>(l.hbits) + 16 * static_cast<size_t>(l.n_sc + l.n_mn);
  l.sb_bytes = static_cast<size_t>(l.blocks) * l.block_bytes + 64 + (l.dmin ? 64 : 0);
  return l;
}

inline PackedGroupLayout PackedGroupLayoutOf(DType t) { return MakePackedGroupLayout(GroupFormatOf(t)); }

// Writes row r (of `cols` columns, type t, source row-major `data`) into its
// lane r % 16 of the packed group starting at `group`. REQUIRES
// HasGroupFormat(t), the group zeroed beforehand.
void PackGroupRow(DType t, int64_t r, int64_t cols, const void* data, uint8_t* group);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_PACKED_GROUP_H_
