#include "server/http/json_limits.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

using nlohmann::json;

// Counts nesting and values; builds nothing. Returning false from a callback
// stops the SAX parser at once, so a body past a limit is read no further.
class BoundsChecker final : public nlohmann::json_sax<json> {
 public:
  explicit BoundsChecker(const JsonLimits& limits) : limits_(limits) {}

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value() && Allocating(); }
  bool binary(binary_t&) override { return Value(); }  // not produced by JSON text
  bool start_object(std::size_t) override { return Open(); }
  bool key(string_t&) override { return Allocating(); }  // a map node
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return Close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    // The parser's own message quotes the last token, which may be most of
    // an 8 MB string: only the offset is reported.
    status_ = absl::InvalidArgumentError(
        absl::StrCat("the body is not valid JSON (or not UTF-8): parse error at byte ", position));
    return false;
  }

  const absl::Status& status() const { return status_; }

 private:
  bool Value() {
    if (++values_ > limits_.max_values) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("JSON with more than ", limits_.max_values, " values (the server's limit)"));
      return false;
    }
    return true;
  }
  bool Allocating() {
    if (++allocating_ > limits_.max_strings_and_containers) {
      status_ =
          absl::InvalidArgumentError(absl::StrCat("JSON with more than ", limits_.max_strings_and_containers,
                                                  " strings (keys included), arrays and objects (the server's limit)"));
      return false;
    }
    return true;
  }
  bool Open() {
    if (!Value() || !Allocating()) return false;
    if (++depth_ > limits_.max_depth) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("JSON nesting deeper than ", limits_.max_depth, " levels (the server's limit)"));
      return false;
    }
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  const JsonLimits& limits_;
  int64_t depth_ = 0;
  int64_t values_ = 0;
  int64_t allocating_ = 0;  // strings, keys, arrays and objects
  absl::Status status_;
};

}  // namespace

absl::StatusOr<json> ParseJsonBounded(std::string_view body, const JsonLimits& limits) {
  BoundsChecker checker(limits);
  const bool ok = json::sax_parse(body.begin(), body.end(), &checker, json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    if (!checker.status().ok()) return checker.status();
    return absl::InvalidArgumentError("the body is not valid JSON (or not UTF-8)");
  }
  // The SAX pass accepted the whole body, so this parse succeeds and builds
  // at most max_values nodes, none nested deeper than max_depth.
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON (or not UTF-8)");
  return j;
}

}  // namespace beacon
