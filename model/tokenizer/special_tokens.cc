#include "model/tokenizer/special_tokens.h"

#include <algorithm>

namespace beacon {

SpecialTokenSplitter::SpecialTokenSplitter(std::vector<Candidate> candidates) {
  for (auto& c : candidates) {
    if (!c.text.empty()) candidates_.push_back(std::move(c));
  }
  std::stable_sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
    if (a.text.size() != b.text.size()) return a.text.size() > b.text.size();
    return a.id < b.id;
  });
}

std::vector<SpecialTokenSplitter::Fragment> SpecialTokenSplitter::Split(std::string_view text,
                                                                        bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const Candidate& c : candidates_) {
    if (c.control && !parse_special) continue;
    // Cheap rejection: most candidates do not occur at all.
    if (text.find(c.text) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.begin + f.length;
      const std::string_view window = text.substr(0, end);  // matches must end inside f
      size_t pos = f.begin;
      for (size_t m; (m = window.find(c.text, pos)) != std::string_view::npos;) {
        if (m > pos) next.push_back({-1, pos, m - pos});
        next.push_back({c.id, m, c.text.size()});
        pos = m + c.text.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace beacon
