#include "model/tokenizer/jinja/renderer.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/jinja/builtins.h"

namespace beacon::jinja {
namespace {

bool IsNum(const Value& v) { return v.is_json() && (v.json().is_number() || v.json().is_boolean()); }
bool IsInt(const Value& v) { return v.is_json() && (v.json().is_number_integer() || v.json().is_boolean()); }
int64_t AsInt(const Value& v) { return v.json().is_boolean() ? v.json().get<bool>() : v.json().get<int64_t>(); }
double AsDouble(const Value& v) { return v.json().is_boolean() ? v.json().get<bool>() : v.json().get<double>(); }
bool IsStr(const Value& v) { return v.is_json() && v.json().is_string(); }

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  for (const Value* v : {&a, &b}) {
    if (v->is_undefined())
      Fail(v->name().empty() ? "undefined value used" : absl::StrCat("'", v->name(), "' is undefined"));
  }
  Fail(absl::StrCat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '", TypeName(b), "'"));
}

bool Contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (IsStr(container)) {
    if (!IsStr(item)) Fail(absl::StrCat("'in <string>' requires string as left operand, not ", TypeName(item)));
    return absl::StrContains(container.json().get_ref<const std::string&>(), item.json().get_ref<const std::string&>());
  }
  if (container.is_json() && container.json().is_object()) {
    return IsStr(item) && container.json().contains(item.json().get<std::string>());
  }
  for (const Json& e : Iterate(container)) {
    if (Equal(Value(e), item)) return true;
  }
  return false;
}

}  // namespace

Renderer::Renderer(std::map<std::string, Value> vars, RenderLimits limits) : limits_(limits) {
  scopes_.push_back(std::make_shared<Frame>(std::move(vars)));
}

void Renderer::Render(const Body& body, std::string* out) { Exec(body, out); }

void Renderer::Append(std::string* out, const std::string& text) const {
  if (out->size() + text.size() > limits_.max_output_bytes) {
    Fail(absl::StrCat("rendered text exceeds ", limits_.max_output_bytes, " bytes"));
  }
  out->append(text);
}

void Renderer::CountIteration() {
  if (++iterations_ > limits_.max_iterations)
    Fail(absl::StrCat("more than ", limits_.max_iterations, " loop iterations"));
}

Value Renderer::LookupName(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = (*it)->find(name);
    if (found != (*it)->end()) return found->second;
  }
  return Value::Undefined(name);
}

void Renderer::Assign(const std::string& name, Value value) { (*scopes_.back())[name] = std::move(value); }

Renderer::Flow Renderer::Exec(const Body& body, std::string* out) {
  for (const auto& node : body) {
    const Flow flow = ExecNode(*node, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::ExecNode(const Node& node, std::string* out) {
  try {
    switch (node.kind) {
      case Node::Kind::kText: Append(out, node.text); break;
      case Node::Kind::kOutput: Append(out, ToString(Eval(*node.expr))); break;
      case Node::Kind::kIf:
        for (size_t i = 0; i < node.conditions.size(); ++i) {
          if (Truthy(Eval(*node.conditions[i]))) return Exec(node.bodies[i], out);
        }
        return Exec(node.else_body, out);
      case Node::Kind::kFor: ExecFor(node, out); break;
      case Node::Kind::kSet: {
        Value value;
        if (node.expr) {
          value = Eval(*node.expr);
        } else {
          std::string text;
          Exec(node.body, &text);
          value = Value(Json(text));
        }
        if (!node.attr.empty()) {
          const Value ns = LookupName(node.targets[0]);
          if (ns.kind() != Value::Kind::kNamespace) {
            Fail(absl::StrCat("cannot set attribute '", node.attr, "' of '", node.targets[0], "' (a ", TypeName(ns),
                              ", not a namespace)"));
          }
          ns.ns()[node.attr] = value.ToJson();
        } else if (node.targets.size() == 1) {
          Assign(node.targets[0], std::move(value));
        } else {
          const Json items = Iterate(value);
          if (items.size() != node.targets.size()) {
            Fail(absl::StrCat("cannot unpack ", items.size(), " values into ", node.targets.size(), " names"));
          }
          for (size_t i = 0; i < items.size(); ++i) Assign(node.targets[i], Value(items[i]));
        }
        break;
      }
      case Node::Kind::kMacro: DefineMacro(node); break;
      case Node::Kind::kFilterBlock: {
        std::string text;
        const Flow flow = Exec(node.body, &text);
        scopes_.push_back(std::make_shared<Frame>(Frame{{kFilterInput, Value(Json(text))}}));
        Value filtered;
        try {
          filtered = Eval(*node.expr);
        } catch (...) {
          scopes_.pop_back();
          throw;
        }
        scopes_.pop_back();
        Append(out, ToString(filtered));
        if (flow != Flow::kNormal) return flow;
        break;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
    }
  } catch (RenderError& err) {
    if (!err.located && !err.raised) {
      err.message = absl::StrCat("template line ", node.line, ", column ", node.column, ": ", err.message);
      err.located = true;
    }
    throw;
  }
  return Flow::kNormal;
}

void Renderer::ExecFor(const Node& node, std::string* out) {
  const Json all = Iterate(Eval(*node.expr));
  auto bind = [&](const Json& item) {
    if (node.targets.size() == 1) {
      Assign(node.targets[0], Value(item));
      return;
    }
    if (!item.is_array() || item.size() != node.targets.size()) {
      Fail(absl::StrCat("cannot unpack ", PyRepr(item), " into ", node.targets.size(), " names"));
    }
    for (size_t i = 0; i < item.size(); ++i) Assign(node.targets[i], Value(item[i]));
  };
  scopes_.push_back(std::make_shared<Frame>());
  Json items = Json::array();
  if (node.filter) {
    for (const Json& item : all) {
      CountIteration();
      bind(item);
      if (Truthy(Eval(*node.filter))) items.push_back(item);
    }
  } else {
    items = all;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    CountIteration();
    scopes_.back() = std::make_shared<Frame>();  // each iteration starts clean, as in jinja2
    bind(items[static_cast<size_t>(i)]);
    Json loop = {{"index", i + 1},  {"index0", i},        {"revindex", n - i}, {"revindex0", n - i - 1},
                 {"first", i == 0}, {"last", i == n - 1}, {"length", n},       {"depth", 1},
                 {"depth0", 0}};
    if (i > 0) loop["previtem"] = items[static_cast<size_t>(i - 1)];
    if (i + 1 < n) loop["nextitem"] = items[static_cast<size_t>(i + 1)];
    Assign("loop", Value(std::move(loop)));
    if (Exec(node.body, out) == Flow::kBreak) break;
  }
  scopes_.pop_back();
  if (n == 0) Exec(node.else_body, out);
}

void Renderer::DefineMacro(const Node& node) {
  const Node* def = &node;
  Assign(node.name, Value::Callable(node.name, [this, def](CallArgs& args) {
           if (call_depth_ >= limits_.max_call_depth) {
             Fail(absl::StrCat("macro calls nested deeper than ", limits_.max_call_depth, " (recursion?)"));
           }
           auto frame = std::make_shared<Frame>();
           std::vector<std::shared_ptr<Frame>> saved = {scopes_[0], frame};
           std::swap(saved, scopes_);
           ++call_depth_;
           struct Restore {
             Renderer* r;
             std::vector<std::shared_ptr<Frame>>* saved;
             ~Restore() {
               std::swap(*saved, r->scopes_);
               --r->call_depth_;
             }
           } restore{this, &saved};
           if (args.positional.size() > def->params.size()) {
             Fail(absl::StrCat("macro '", def->name, "' takes ", def->params.size(), " arguments, got ",
                               args.positional.size()));
           }
           for (size_t i = 0; i < def->params.size(); ++i) {
             Value v = Arg(args, i, def->params[i]);
             if (v.is_undefined() && def->defaults[i]) v = Eval(*def->defaults[i]);
             (*frame)[def->params[i]] = std::move(v);
           }
           std::string text;
           Exec(def->body, &text);
           return Value(Json(std::move(text)));
         }));
}

CallArgs Renderer::EvalArgs(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(Eval(*e.args[i]));
  for (size_t i = 0; i < e.kwargs.size(); ++i) args.keyword.emplace_back(e.kwnames[i], Eval(*e.kwargs[i]));
  return args;
}

Value Renderer::Eval(const Expr& e) {
  try {
    return EvalInner(e);
  } catch (RenderError& err) {
    if (!err.located && !err.raised) {
      err.message = absl::StrCat("template line ", e.line, ", column ", e.column, ": ", err.message);
      err.located = true;
    }
    throw;
  }
}

Value Renderer::EvalInner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return Value(e.literal);
    case Expr::Kind::kName: return LookupName(e.name);
    case Expr::Kind::kList: {
      Json out = Json::array();
      for (const auto& item : e.args) out.push_back(Eval(*item).ToJson());
      return Value(std::move(out));
    }
    case Expr::Kind::kDict: {
      Json out = Json::object();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value key = Eval(*e.args[i]);
        out[IsStr(key) ? key.json().get<std::string>() : ToString(key)] = Eval(*e.args[i + 1]).ToJson();
      }
      return Value(std::move(out));
    }
    case Expr::Kind::kAttr: return GetAttr(Eval(*e.args[0]), e.name);
    case Expr::Kind::kSubscript: return GetItem(Eval(*e.args[0]), Eval(*e.args[1]));
    case Expr::Kind::kSlice: {
      auto part = [&](int k) { return e.args[k] ? Eval(*e.args[k]) : Value(nullptr); };
      return Slice(Eval(*e.args[0]), part(1), part(2), part(3));
    }
    case Expr::Kind::kCall: return EvalCall(e);
    case Expr::Kind::kFilter: {
      const Value operand = Eval(*e.args[0]);
      CallArgs args = EvalArgs(e, 1);
      return ApplyFilter(e.name, operand, args);
    }
    case Expr::Kind::kTest: {
      const Value operand = Eval(*e.args[0]);
      CallArgs args = EvalArgs(e, 1);
      return Value(ApplyTest(e.name, operand, args) != e.negated);
    }
    case Expr::Kind::kUnary: {
      const Value v = Eval(*e.args[0]);
      if (e.name == "not") return Value(!Truthy(v));
      if (!IsNum(v)) Unsupported(e.name, v, Value(nullptr));
      if (e.name == "+") return v;
      return IsInt(v) && AsInt(v) != INT64_MIN ? Value(-AsInt(v)) : Value(-AsDouble(v));
    }
    case Expr::Kind::kBinary: return EvalBinary(e);
    case Expr::Kind::kCond:
      if (Truthy(Eval(*e.args[0]))) return Eval(*e.args[1]);
      return e.args[2] ? Eval(*e.args[2]) : Value::Undefined("");
  }
  return Value();
}

Value Renderer::EvalCall(const Expr& e) {
  const Expr& callee = *e.args[0];
  Value fn;
  if (callee.kind == Expr::Kind::kAttr) {
    const Value obj = Eval(*callee.args[0]);
    CallArgs args = EvalArgs(e, 1);
    if (std::optional<Value> r = CallMethod(obj, callee.name, args)) return *std::move(r);
    fn = GetAttr(obj, callee.name);
    if (fn.kind() == Value::Kind::kCallable) return fn.fn()(args);
    Fail(absl::StrCat("'", TypeName(obj), "' object has no method '", callee.name, "'"));
  }
  fn = Eval(callee);
  if (fn.kind() != Value::Kind::kCallable) {
    if (fn.is_undefined() && !fn.name().empty()) Fail(absl::StrCat("'", fn.name(), "' is undefined"));
    Fail(absl::StrCat("'", TypeName(fn), "' object is not callable"));
  }
  CallArgs args = EvalArgs(e, 1);
  return fn.fn()(args);
}

Value Renderer::EvalBinary(const Expr& e) {
  const std::string& op = e.name;
  const Value a = Eval(*e.args[0]);
  if (op == "and") return Truthy(a) ? Eval(*e.args[1]) : a;
  if (op == "or") return Truthy(a) ? a : Eval(*e.args[1]);
  const Value b = Eval(*e.args[1]);
  if (op == "~") {
    std::string s = ToString(a);
    Append(&s, ToString(b));
    return Value(std::move(s));
  }
  if (op == "==") return Value(Equal(a, b));
  if (op == "!=") return Value(!Equal(a, b));
  if (op == "<") return Value(Less(a, b));
  if (op == ">") return Value(Less(b, a));
  if (op == "<=") return Value(!Less(b, a));
  if (op == ">=") return Value(!Less(a, b));
  if (op == "in") return Value(Contains(b, a));
  if (op == "notin") return Value(!Contains(b, a));
  if (op == "+") {
    if (IsStr(a) && IsStr(b)) {
      std::string s = a.json().get<std::string>();
      Append(&s, b.json().get_ref<const std::string&>());
      return Value(std::move(s));
    }
    if (a.is_json() && b.is_json() && a.json().is_array() && b.json().is_array()) {
      Json out = a.json();
      for (const Json& x : b.json()) out.push_back(x);
      return Value(std::move(out));
    }
  }
  if (op == "*" && ((IsStr(a) && IsInt(b)) || (IsInt(a) && IsStr(b)))) {
    const std::string& s = IsStr(a) ? a.json().get_ref<const std::string&>() : b.json().get_ref<const std::string&>();
    const int64_t n = IsStr(a) ? AsInt(b) : AsInt(a);
    std::string out;
    if (n > 0 && s.size() * static_cast<uint64_t>(n) > limits_.max_output_bytes) Fail("string repetition too long");
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  if (!IsNum(a) || !IsNum(b)) Unsupported(op, a, b);
  const bool ints = IsInt(a) && IsInt(b);
  if (op == "/") {
    if (AsDouble(b) == 0) Fail("division by zero");
    return Value(AsDouble(a) / AsDouble(b));
  }
  if (ints) {
    const int64_t x = AsInt(a);
    const int64_t y = AsInt(b);
    int64_t r = 0;
    // Python's ints do not overflow; past int64 we fall back to float.
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value(r);
    if ((op == "//" || op == "%") && !(x == INT64_MIN && y == -1)) {
      if (y == 0) Fail("integer division or modulo by zero");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // Python floors
      return op == "//" ? Value(q) : Value(x - q * y);
    }
    if (op == "**" && y >= 0) {
      const double p = std::pow(static_cast<double>(x), static_cast<double>(y));
      if (std::fabs(p) < 9.0e15) return Value(static_cast<int64_t>(p));  // exact in a double
    }
  }
  const double x = AsDouble(a);
  const double y = AsDouble(b);
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) Fail("float division or modulo by zero");
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") return Value(x - std::floor(x / y) * y);
  Unsupported(op, a, b);
}

}  // namespace beacon::jinja
