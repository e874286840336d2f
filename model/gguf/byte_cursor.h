// A bounds-checked little-endian reader over an untrusted byte buffer.
//
// Every read checks the remaining length first and fails (returns false,
// consuming nothing) rather than reading past the end; values are copied out
// with memcpy, so unaligned data is fine. The GGUF parser builds its error
// messages from pos() at the point of failure.
#ifndef BEACON_MODEL_GGUF_BYTE_CURSOR_H_
#define BEACON_MODEL_GGUF_BYTE_CURSOR_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace beacon {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

class ByteCursor {
 public:
  // `base` is the file offset of data[0], so that pos() reports file offsets
  // when the cursor covers only part of a file.
  explicit ByteCursor(std::string_view data, uint64_t base = 0) : data_(data), base_(base) {}

  uint64_t pos() const { return base_ + at_; }
  uint64_t remaining() const { return data_.size() - at_; }

  bool ReadU32(uint32_t* v) { return ReadRaw(v, sizeof(*v)); }
  bool ReadU64(uint64_t* v) { return ReadRaw(v, sizeof(*v)); }

  // A view of the next `n` bytes.
  bool ReadBytes(uint64_t n, std::string_view* out) {
    if (n > remaining()) return false;
    *out = data_.substr(at_, n);
    at_ += n;
    return true;
  }

  // The bytes consumed since file offset `from` (a pos() taken earlier).
  std::string_view Since(uint64_t from) const { return data_.substr(from - base_, base_ + at_ - from); }

  bool Skip(uint64_t n) {
    if (n > remaining()) return false;
    at_ += n;
    return true;
  }

 private:
  bool ReadRaw(void* out, size_t n) {
    if (n > remaining()) return false;
    std::memcpy(out, data_.data() + at_, n);
    at_ += n;
    return true;
  }

  std::string_view data_;
  uint64_t base_;
  uint64_t at_ = 0;
};

}  // namespace beacon

#endif  // BEACON_MODEL_GGUF_BYTE_CURSOR_H_
