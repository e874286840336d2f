// RunMain: every program's entry point. Our code reports errors as
// absl::Status, but the libraries under it (the standard library, nlohmann's
// JSON, gRPC) may still throw; an exception that escaped Main would end the
// process in std::terminate with an abort and no word of what failed.
// RunMain names the program and the exception on stderr and exits with 1.
#ifndef BEACON_UTIL_RUN_MAIN_H_
#define BEACON_UTIL_RUN_MAIN_H_

#include <cstdio>
#include <exception>

namespace beacon {

inline int RunMain(const char* program, int (*main_fn)(int, char**), int argc, char** argv) noexcept {
  try {
    return main_fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: an unknown exception\n", program);
  }
  return 1;
}

}  // namespace beacon

#endif  // BEACON_UTIL_RUN_MAIN_H_
