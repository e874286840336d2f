// The headers most of our translation units include, precompiled once per
// target when the build is configured with -DBEACON_PCH=ON (CMakeLists.txt).
// The sanitizer builds (tools/sanitize.sh) turn it on: these headers are much
// of a file's compile time there (gmock, nlohmann/json and absl alone take
// ~9 s to parse under clang, -O1 and a sanitizer; a test compiles in 4-7 s
// instead of 8-10 with them precompiled), and CI builds ~400 translation
// units twice that way on a 2-core machine. Only standard and third-party
// headers belong here: a header of ours would rebuild every target on each
// change. The Release build (make build, CI's first, the images) does not
// precompile, so each file's own includes are still checked there.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

#ifdef BEACON_PCH_TESTS
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#endif
