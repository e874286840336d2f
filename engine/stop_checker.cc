#include "engine/stop_checker.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace beacon {
namespace {

// True when byte `c` starts a UTF-8 character (is not a continuation byte).
// Cuts are only made at character starts, so every emitted piece is valid
// UTF-8 when the input is; a stop string is assumed to be valid UTF-8 too.
bool IsCharStart(char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }

// True when `tail` is a (possibly complete) prefix of `stop`.
bool IsPrefixOf(std::string_view tail, std::string_view stop) {
  return tail.size() <= stop.size() && stop.substr(0, tail.size()) == tail;
}

}  // namespace

StopChecker::StopChecker(std::vector<std::string> stop_strings) {
  // Empty stop strings would match everywhere; rejecting them is the API
  // layer's job, here they are dropped.
  for (std::string& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

// Semantics: the result equals feeding the text one character at a time and
// stopping the moment any stop string is complete. So the stop that *ends*
// first wins; among stops ending at the same place, the one starting earliest
// (the longest). This makes the output independent of how the text is split
// into deltas, e.g. stops {"abc", "b"} on "abc" emit "a" whether "abc" comes
// as one delta or as "ab" + "c".
//
// Invariant between calls: held_ is the shortest suffix of the text so far
// that could still begin a stop string (a proper prefix of some stop), or is
// empty. Everything before it has been emitted and can never be part of a
// match, because every position before held_ has already mismatched every
// stop string.
StopChecker::Result StopChecker::Push(std::string_view delta) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    return result;
  }
  held_.append(delta.data(), delta.size());
  const std::string_view text = held_;

  // Earliest-ending complete match. For a fixed stop string the first
  // occurrence is also its earliest end.
  size_t best_start = std::string_view::npos;
  size_t best_end = std::string_view::npos;
  const std::string* best = nullptr;
  for (const std::string& stop : stops_) {
    size_t pos = text.find(stop);
    while (pos != std::string_view::npos && !IsCharStart(text[pos])) {
      pos = text.find(stop, pos + 1);
    }
    if (pos == std::string_view::npos) continue;
    const size_t end = pos + stop.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_start = pos;
      best_end = end;
      best = &stop;
    }
  }
  if (best_start != std::string_view::npos) {
    result.text.assign(text.substr(0, best_start));
    result.stopped = true;
    stopped_ = true;
    matched_ = *best;
    held_.clear();
    return result;
  }

  // No complete match: hold back from the earliest position whose suffix is
  // still a prefix of some stop string. Only the last (longest stop - 1)
  // bytes can qualify.
  size_t longest = 0;
  for (const std::string& stop : stops_) longest = std::max(longest, stop.size());
  size_t cut = text.size();
  const size_t first = text.size() >= longest ? text.size() - longest + 1 : 0;
  for (size_t i = first; i < text.size(); ++i) {
    if (!IsCharStart(text[i])) continue;
    const std::string_view tail = text.substr(i);
    const bool live =
        std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) { return IsPrefixOf(tail, s); });
    if (live) {
      cut = i;
      break;
    }
  }
  result.text.assign(text.substr(0, cut));
  held_.erase(0, cut);
  return result;
}

std::string StopChecker::Flush() {
  // After a stop nothing is held (and nothing more may be emitted).
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace beacon
