// Stop criteria on the text stream: stop strings are never streamed past.
//
// Text deltas go in; what comes out is safe to send to the client. Text that
// could still be the start of a stop string is held back until it either
// completes a stop string (then the stream ends at the start of the match, the
// stop string itself excluded) or can no longer match (then it is released).
#ifndef BEACON_ENGINE_STOP_CHECKER_H_
#define BEACON_ENGINE_STOP_CHECKER_H_

#include <string>
#include <string_view>
#include <vector>

namespace beacon {

class StopChecker {
 public:
  explicit StopChecker(std::vector<std::string> stop_strings);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; emit `text`, then finish
  };

  // Feeds the next text delta (complete UTF-8).
  Result Push(std::string_view delta);
  // At the end of generation: releases whatever is held back.
  std::string Flush();
  // The stop string that matched ("" while none has).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_STOP_CHECKER_H_
