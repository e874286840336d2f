#include "engine/grammar/xgrammar_log.h"

#include <algorithm>
#include <string>

// xgrammar's own logging header (from its source tree, CMakeLists.txt adds the
// path for this file alone): LogFatalError, the exception xgrammar throws and
// catches by type, and the declarations of the two hooks defined below.
#include "support/logging.h"
#include "util/log.h"

#if !XGRAMMAR_LOG_CUSTOMIZE
#error "xgrammar must be built with XGRAMMAR_LOG_CUSTOMIZE=1 (CMakeLists.txt), or these hooks are never called"
#endif

namespace beacon {
namespace {

thread_local XgrammarWarnings* current = nullptr;

}  // namespace

XgrammarWarnings::XgrammarWarnings() : outer_(current) { current = this; }

XgrammarWarnings::~XgrammarWarnings() { current = outer_; }

void XgrammarWarnings::Add(const std::string& message) {
  if (messages_.size() >= kMax || std::find(messages_.begin(), messages_.end(), message) != messages_.end()) return;
  messages_.push_back(message);
}

}  // namespace beacon

namespace xgrammar {

// What xgrammar's default build does (support/logging.cc): the message, with
// where it was raised, as the exception its callers catch. GrammarCompiler
// strips the prefix before a client sees it.
[[noreturn]] void LogFatalImpl(const std::string& file, int lineno, const std::string& message) {
  throw LogFatalError(file, lineno, message);
}

// A warning is kept by the thread's XgrammarWarnings, if any, and logged
// (GrammarCompiler logs the ones it accepts with the request's field: here
// only those raised outside a compile, by a matcher say); info and debug
// records are debug.
void LogMessageImpl(const std::string& file, int lineno, int level, const std::string& message) {
  if (level >= XGRAMMAR_LOG_LEVEL_WARNING) {
    if (beacon::current != nullptr) {
      beacon::current->Add(message);
      return;
    }
    beacon::logging::Warn("xgrammar: %s", message);
    return;
  }
  beacon::logging::Debug("xgrammar (%s:%d): %s", file, lineno, message);
}

}  // namespace xgrammar
