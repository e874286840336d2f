// The merge engine of byte-level BPE: vocabulary lookup, merge ranks, and the
// encoding of one pre-tokenized word into token ids.
//
// Merging follows llama.cpp exactly: start from one symbol per byte; while
// any adjacent pair has a merge, merge the pair with the lowest rank, the
// leftmost one among equal ranks (a min-heap on (rank, position) with stale
// entries skipped). A symbol that is not a vocabulary token at the end (only
// possible for a byte whose byte-level character the vocabulary lacks) falls
// back to per-byte lookups of its text, which in practice drops it, as
// llama.cpp does.
//
// Thread safety: immutable after Build; EncodeWord is const and keeps its
// working memory in the caller's Scratch.
#ifndef BEACON_MODEL_TOKENIZER_BPE_MODEL_H_
#define BEACON_MODEL_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace beacon {

class BpeModel {
 public:
  // Reusable working memory for EncodeWord (one per thread/call).
  struct Scratch {
    struct Symbol {
      int32_t id;    // token id, or -1 for a byte the vocabulary lacks
      int32_t prev;  // neighbour indices, -1 at the ends
      int32_t next;
      uint32_t len;  // bytes covered; 0 once merged into its left neighbour
    };
    struct Pair {
      int32_t rank;
      int32_t left;
      int32_t right;
      uint32_t len;    // left.len + right.len when the pair was queued
      int32_t result;  // id of the merged token
    };
    std::vector<Symbol> symbols;
    std::vector<Pair> heap;
    std::string text;  // byte-level text of a word (ignore_merges lookups)
  };

  // INVALID_ARGUMENT when tokens repeat, a merge is not "left right", or a
  // merge names a token (or yields a text) that is not in the vocabulary.
  static absl::StatusOr<BpeModel> Build(const std::vector<std::string>& tokens, const std::vector<std::string>& merges);

  // The id of the token whose (byte-level) text is `text`, or -1.
  int32_t Find(std::string_view text) const;

  // Appends the ids for `word` (raw bytes of one pre-tokenized word). With
  // `ignore_merges`, a word that is itself a token is emitted as that token.
  void EncodeWord(std::string_view word, bool ignore_merges, Scratch* scratch, std::vector<int32_t>* out) const;

  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void QueuePair(int32_t left, int32_t right, Scratch* scratch) const;

  absl::flat_hash_map<std::string, int32_t> token_ids_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};                    // id of each byte's character, or -1
  std::array<std::vector<int32_t>, 256> byte_fallback_{};  // llama.cpp's fallback for a missing one
};

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_BPE_MODEL_H_
