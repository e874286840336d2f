#include "kv/serving/kv_cache_manager.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace beacon {

KvCacheManager::KvCacheManager(KvCache* cache) : cache_(cache) {}

KvCacheManager::~KvCacheManager() = default;

void KvCacheManager::EnablePrefixCache(uint64_t salt) {
  prefix_cache_ = std::make_unique<PrefixCache>(&cache_->pool(), BlockSize(), salt);
}

absl::Status KvCacheManager::Add(KvSeqId id, KvSeqSpec spec) {
  const size_t ids = spec.prompt.size();
  if (spec.prompt_len < 1 || (ids != 0 && ids != static_cast<size_t>(spec.prompt_len)) ||
      (ids == 0 && prefix_cache_ != nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv sequence ", id, ": prompt_len ", spec.prompt_len, " with ", ids, " prompt ids"));
  }
  if (seqs_.contains(id)) return absl::AlreadyExistsError(absl::StrCat("kv sequence ", id, " exists"));
  Seq& s = seqs_[id];
  s.spec = std::move(spec);
  s.kv = std::make_unique<SequenceKv>(cache_);
  return absl::OkStatus();
}

void KvCacheManager::Remove(KvSeqId id) { seqs_.erase(id); }  // ~SequenceKv gives its blocks back

SequenceKv* KvCacheManager::kv(KvSeqId id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.kv.get();
}

const SequenceKv* KvCacheManager::kv(KvSeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.kv.get();
}

int32_t KvCacheManager::BlocksToAppend(KvSeqId id, int32_t n) const {
  const int32_t bs = BlockSize();
  const SequenceKv* s = kv(id);
  const int32_t slots = s != nullptr ? s->num_slots() : 0;
  const int32_t blocks = s != nullptr ? s->num_blocks() : 0;
  return std::max(0, (slots + n + bs - 1) / bs - blocks);
}

int32_t KvCacheManager::OwnBlocks(KvSeqId id) const {
  const SequenceKv* s = kv(id);
  return s != nullptr ? s->own_blocks() : 0;
}

int64_t KvCacheManager::HeldSlots() const {
  // Blocks some sequence holds by reference (prefix cache, sample group):
  // counted once, whole, however many sequences hold them.
  absl::flat_hash_set<int32_t> shared;
  for (const auto& [id, s] : seqs_) {
    for (int32_t b = 0; b < s.kv->shared_blocks(); ++b) shared.insert(s.kv->block_ids()[b]);
  }
  const int32_t bs = BlockSize();
  int64_t held = static_cast<int64_t>(shared.size()) * bs;
  for (const auto& [id, s] : seqs_) {
    const int32_t slots = s.kv->num_slots();
    int32_t own = slots;
    if (!shared.empty()) {
      for (int32_t b = 0; b < s.kv->num_blocks(); ++b) {
        if (shared.contains(s.kv->block_ids()[b])) own -= std::max(0, std::min(bs, slots - b * bs));
      }
    }
    held += own;
  }
  return held;
}

void KvCacheManager::OnRan(KvSeqId id, int32_t prompt_done, bool prefilling) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  s.prefilling = prefilling;
  if (!prefilling) s.started = true;
  if (prefix_cache_ == nullptr) return;
  const int32_t prompt = s.spec.prompt_len;
  const int32_t n =
      CacheablePromptBlocks(s.spec.kv, prompt, std::min(prompt_done, prompt), s.kv->num_slots(), BlockSize());
  if (n > s.indexed) {  // new whole prompt blocks written: index them
    prefix_cache_->Insert(s.spec.prompt, s.kv->block_ids(), n, s.spec.cache_partition);
    s.indexed = n;
  }
}

void KvCacheManager::Release(KvSeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  it->second.kv->Release();
  it->second.prefilling = true;
  it->second.indexed = 0;
}

KvCacheManager::Source KvCacheManager::FindSource(KvSeqId id) const {
  Source src;
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return src;
  const Seq& s = it->second;
  // Only a sequence holding nothing takes blocks by reference, and only the
  // whole blocks before its prompt's last token (ShareablePromptBlocks).
  if (s.kv->num_blocks() > 0) return src;
  const int32_t bs = BlockSize();
  const int32_t want = ShareablePromptBlocks(s.spec.kv, s.spec.prompt_logprobs, s.spec.prompt_len, bs);
  if (want == 0) return src;
  // A sample group's later member, before it ever ran: its first member's prompt.
  if (s.spec.group != 0 && s.spec.group != id && !s.started) {
    auto donor = seqs_.find(s.spec.group);
    if (donor != seqs_.end()) {
      if (donor->second.prefilling) {  // still running the prompt (or recomputing it)
        src.probe.wait = true;
        return src;
      }
      // Holding the prompt (not finished, not preempted): take its blocks.
      if (donor->second.kv->num_slots() >= want * bs) {
        src.probe.blocks = want;
        src.donor = donor->second.kv.get();
        return src;
      }
    }
  }
  if (prefix_cache_ == nullptr) return src;
  src.match = prefix_cache_->Find(s.spec.prompt, want, s.spec.cache_partition);
  src.probe.blocks = src.match.blocks();
  src.probe.idle = src.match.idle;
  return src;
}

KvPrefixProbe KvCacheManager::Probe(KvSeqId id) const { return FindSource(id).probe; }

int32_t KvCacheManager::Adopt(KvSeqId id, int32_t lookup_tokens) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return 0;
  Source src = FindSource(id);
  SequenceKv& kv = *it->second.kv;
  if (src.donor != nullptr) {
    kv.ShareFrom(*src.donor, src.probe.blocks * BlockSize());
  } else if (src.probe.blocks > 0) {
    kv.AdoptBlocks(prefix_cache_->Take(src.match));
  }
  const int32_t slots = kv.num_slots();
  if (prefix_cache_ != nullptr) {
    prefix_queries_ += lookup_tokens;
    prefix_hits_ += slots;
  }
  return slots;
}

}  // namespace beacon
