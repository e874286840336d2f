#include "kv/policy/selection.h"

#include <algorithm>

namespace beacon {

void SelectKeep(const float* scores, const KeysView& keys, int kv_head, const Protection& p, int32_t n_keep,
                std::vector<int32_t>* keep) {
  const int32_t n = keys.n_slots();
  keep->clear();
  std::vector<int32_t> rest;
  rest.reserve(n);
  for (int32_t s = 0; s < n; ++s) {
    const int32_t pos = keys.position(kv_head, s);
    const bool prot = (p.keep_prompt && pos < p.prompt_len) || pos < p.sinks || s >= n - p.window;
    (prot ? *keep : rest).push_back(s);
  }
  if (static_cast<int32_t>(keep->size()) >= n_keep) {
    keep->resize(n_keep);
    return;
  }
  const size_t want = static_cast<size_t>(n_keep) - keep->size();
  auto better = [scores](int32_t a, int32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a > b; };
  std::nth_element(rest.begin(), rest.begin() + want, rest.end(), better);
  keep->insert(keep->end(), rest.begin(), rest.begin() + want);
  std::sort(keep->begin(), keep->end());
}

}  // namespace beacon
