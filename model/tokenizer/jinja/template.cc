#include "model/tokenizer/jinja/template.h"

#include <ctime>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/jinja/builtins.h"
#include "model/tokenizer/jinja/parser.h"
#include "model/tokenizer/jinja/value.h"

namespace beacon::jinja {
namespace {

constexpr int64_t kMaxRange = 1'000'000;

// HF: datetime.now().strftime(fmt), local time; a fixed `now` is in UTC.
Value StrftimeNow(CallArgs& args, std::optional<int64_t> fixed_now) {
  const Value& fmt = Arg(args, 0, "format");
  if (!fmt.is_json() || !fmt.json().is_string()) Fail("strftime_now: the format must be a string");
  std::tm tm{};
  if (fixed_now) {
    const std::time_t now = static_cast<std::time_t>(*fixed_now);
    gmtime_r(&now, &tm);
  } else {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), fmt.json().get_ref<const std::string&>().c_str(), &tm);
  return Value(std::string(buf, n));
}

Value Range(CallArgs& args) {
  int64_t v[3] = {0, 0, 1};
  const size_t n = args.positional.size();
  if (n < 1 || n > 3) Fail("range expects 1 to 3 integer arguments");
  for (size_t i = 0; i < n; ++i) {
    const Value& a = args.positional[i];
    if (!a.is_json() || !a.json().is_number_integer()) Fail("range expects integers");
  }
  if (n == 1) {
    v[1] = args.positional[0].json().get<int64_t>();
  } else {
    for (size_t i = 0; i < n; ++i) v[i] = args.positional[i].json().get<int64_t>();
  }
  if (v[2] == 0) Fail("range() step must not be zero");
  Json out = Json::array();
  for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1];) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) Fail(absl::StrCat("range longer than ", kMaxRange));
    out.push_back(i);
    if (__builtin_add_overflow(i, v[2], &i)) break;
  }
  return Value(std::move(out));
}

std::map<std::string, Value> Globals(std::optional<int64_t> now) {
  std::map<std::string, Value> g;
  g["raise_exception"] = Value::Callable("raise_exception", [](CallArgs& args) -> Value {
    RenderError err{ToString(Arg(args, 0, "message"))};
    err.raised = true;
    throw err;
  });
  g["strftime_now"] = Value::Callable("strftime_now", [now](CallArgs& args) { return StrftimeNow(args, now); });
  g["range"] = Value::Callable("range", Range);
  g["namespace"] = Value::Callable("namespace", [](CallArgs& args) {
    Json attrs = Json::object();
    for (const Value& p : args.positional) {
      if (p.is_json() && p.json().is_object()) attrs.update(p.json());
    }
    for (auto& [k, v] : args.keyword) attrs[k] = v.ToJson();
    return Value::Namespace(std::move(attrs));
  });
  g["dict"] = Value::Callable("dict", [](CallArgs& args) {
    Json out = Json::object();
    for (auto& [k, v] : args.keyword) out[k] = v.ToJson();
    return Value(std::move(out));
  });
  return g;
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  absl::StatusOr<Body> body = jinja::Parse(source);
  if (!body.ok()) return body.status();
  Template t;
  t.body_ = std::make_shared<const Body>(*std::move(body));
  return t;
}

absl::StatusOr<std::string> Template::Render(const Json& vars, const RenderLimits& limits,
                                             std::optional<int64_t> now) const {
  if (!vars.is_object()) return absl::InvalidArgumentError("template variables must be a JSON object");
  std::map<std::string, Value> scope = Globals(now);
  for (auto it = vars.begin(); it != vars.end(); ++it) scope[it.key()] = Value(it.value());
  std::string out;
  try {
    Renderer renderer(std::move(scope), limits);
    renderer.Render(*body_, &out);
  } catch (const RenderError& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const std::exception& e) {  // a nlohmann::json type error we did not foresee
    return absl::InvalidArgumentError(absl::StrCat("template error: ", e.what()));
  }
  return out;
}

}  // namespace beacon::jinja
