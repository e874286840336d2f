// CSV output shared by the report writers (beacon-loadtest's loadtest/report.cc,
// beacon-eval's eval/report.cc). Header-only: no library to link.
#ifndef BEACON_UTIL_CSV_H_
#define BEACON_UTIL_CSV_H_

#include <string>
#include <string_view>

namespace beacon::cli {

// `s` as one RFC 4180 field: unchanged unless it holds a comma, a double
// quote or a line break; then quoted, with inner quotes doubled.
inline std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace beacon::cli

#endif  // BEACON_UTIL_CSV_H_
