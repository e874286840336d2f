// BEACON_ASSIGN_OR_RETURN(lhs, expr): `expr` is an absl::StatusOr<T>; on an
// error the enclosing function returns its status, otherwise its value is
// moved into `lhs` (an existing variable or field). The one copy of the
// macro that loaders and flag parsers use instead of writing their own.
#ifndef BEACON_UTIL_STATUS_MACROS_H_
#define BEACON_UTIL_STATUS_MACROS_H_

#include <utility>

#define BEACON_ASSIGN_OR_RETURN(lhs, expr)                                     \
  do {                                                                         \
    auto beacon_status_or_ = (expr);                                           \
    if (!beacon_status_or_.ok()) return std::move(beacon_status_or_).status(); \
    (lhs) = *std::move(beacon_status_or_);                                     \
  } while (0)

#endif  // BEACON_UTIL_STATUS_MACROS_H_
