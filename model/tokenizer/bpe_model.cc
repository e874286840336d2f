#include "model/tokenizer/bpe_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/unicode.h"

namespace beacon {
namespace {

// Heap order: the lowest rank first, then the leftmost pair.
struct PairAfter {
  bool operator()(const BpeModel::Scratch::Pair& a, const BpeModel::Scratch::Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

absl::StatusOr<BpeModel> BpeModel::Build(const std::vector<std::string>& tokens,
                                         const std::vector<std::string>& merges) {
  BpeModel model;
  model.token_ids_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    auto [it, inserted] = model.token_ids_.emplace(tokens[id], static_cast<int32_t>(id));
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: token text '", tokens[id], "' appears twice (ids ", it->second, " and ", id, ")"));
    }
  }

  model.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    // The separator is the first space after the first character, so a left
    // part may itself begin with a space (as llama.cpp parses them).
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: merge ", rank, " '", merge, "' is not of the form 'left right'"));
    }
    // absl::string_view: this abseil build does not alias std::string_view.
    const absl::string_view left(merge.data(), space);
    const absl::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    const int32_t left_id = model.Find({left.data(), left.size()});
    const int32_t right_id = model.Find({right.data(), right.size()});
    const int32_t result_id = model.Find(absl::StrCat(left, right));
    if (left_id < 0 || right_id < 0 || result_id < 0) {
      const absl::string_view missing = left_id < 0 ? left : right_id < 0 ? right : absl::string_view();
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", rank, " '", merge, "' names unknown token '",
                                                     missing.empty() ? absl::StrCat(left, right) : std::string(missing),
                                                     "'"));
    }
    // The first (lowest-rank) occurrence of a pair wins.
    model.merges_.try_emplace(PairKey(left_id, right_id), Merge{static_cast<int32_t>(rank), result_id});
  }

  for (int b = 0; b < 256; ++b) {
    const std::string ch = EncodeUtf8(ByteToCodepoint(static_cast<uint8_t>(b)));
    model.byte_ids_[b] = model.Find(ch);
    if (model.byte_ids_[b] < 0) {
      for (char c : ch) {
        const int32_t id = model.Find(std::string_view(&c, 1));
        if (id >= 0) model.byte_fallback_[b].push_back(id);
      }
    }
  }
  return model;
}

int32_t BpeModel::Find(std::string_view text) const {
  auto it = token_ids_.find(absl::string_view(text.data(), text.size()));
  return it == token_ids_.end() ? -1 : it->second;
}

void BpeModel::QueuePair(int32_t left, int32_t right, Scratch* scratch) const {
  if (left < 0 || right < 0) return;
  const Scratch::Symbol& l = scratch->symbols[left];
  const Scratch::Symbol& r = scratch->symbols[right];
  if (l.id < 0 || r.id < 0) return;
  auto it = merges_.find(PairKey(l.id, r.id));
  if (it == merges_.end()) return;
  scratch->heap.push_back({it->second.rank, left, right, l.len + r.len, it->second.result});
  std::push_heap(scratch->heap.begin(), scratch->heap.end(), PairAfter());
}

void BpeModel::EncodeWord(std::string_view word, bool ignore_merges, Scratch* scratch,
                          std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    scratch->text.clear();
    AppendByteLevel(word, &scratch->text);
    if (int32_t id = Find(scratch->text); id >= 0) {
      out->push_back(id);
      return;
    }
  }

  auto& symbols = scratch->symbols;
  auto& heap = scratch->heap;
  symbols.clear();
  heap.clear();
  const int32_t n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back({byte_ids_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1});
  }
  for (int32_t i = 0; i + 1 < n; ++i) QueuePair(i, i + 1, scratch);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), PairAfter());
    const Scratch::Pair pair = heap.back();
    heap.pop_back();
    Scratch::Symbol& left = symbols[pair.left];
    Scratch::Symbol& right = symbols[pair.right];
    // Stale: one side was merged away or grew since the pair was queued
    // (a symbol only grows by absorbing its right neighbour).
    if (left.len == 0 || right.len == 0 || left.next != pair.right || left.len + right.len != pair.len) {
      continue;
    }
    left.id = pair.result;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    QueuePair(left.prev, pair.left, scratch);
    QueuePair(pair.left, left.next, scratch);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Scratch::Symbol& s = symbols[i];
    if (s.id >= 0) {
      out->push_back(s.id);
    } else {
      const auto& fallback = byte_fallback_[static_cast<uint8_t>(word[i])];
      out->insert(out->end(), fallback.begin(), fallback.end());
    }
  }
}

}  // namespace beacon
