// xgrammar's log, routed through ours, and the warnings of one compile caught.
//
// xgrammar reports what it cannot enforce only as a log warning, and keeps
// compiling a looser grammar: a JSON schema's oneOf with overlapping branches
// becomes anyOf, a remote $ref, allOf of several options and length bounds
// beside a pattern are dropped, a regex lookahead or an anchor in the middle
// is ignored, an unknown regex escape matches literally. Built as it ships,
// it writes them to stderr, where neither the client nor the compiler sees
// them. The build defines XGRAMMAR_LOG_CUSTOMIZE for xgrammar (CMakeLists.txt),
// which makes it call the two hooks xgrammar_log.cc defines: every record goes
// to util/log.h, and a warning raised on a thread that holds an
// XgrammarWarnings is also kept there, so that GrammarCompiler can refuse a
// grammar the request asked to be enforced exactly (grammar_compiler.cc).
#ifndef BEACON_ENGINE_GRAMMAR_XGRAMMAR_LOG_H_
#define BEACON_ENGINE_GRAMMAR_XGRAMMAR_LOG_H_

#include <string>
#include <vector>

namespace beacon {

// While alive, keeps the xgrammar warnings raised on this thread (each
// message once, in order, at most kMax). One per thread at a time: the
// innermost replaces the outer until it dies. Not copyable.
class XgrammarWarnings {
 public:
  static constexpr size_t kMax = 16;

  XgrammarWarnings();
  ~XgrammarWarnings();
  XgrammarWarnings(const XgrammarWarnings&) = delete;
  XgrammarWarnings& operator=(const XgrammarWarnings&) = delete;

  const std::vector<std::string>& messages() const { return messages_; }
  // Called by the hook: adds `message` unless kept already or kMax are.
  void Add(const std::string& message);

 private:
  std::vector<std::string> messages_;
  XgrammarWarnings* outer_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_GRAMMAR_XGRAMMAR_LOG_H_
