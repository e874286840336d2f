#include "model/tokenizer/jinja/expression_parser.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/jinja/builtins.h"

namespace beacon::jinja::internal {

ExprPtr ExpressionParser::ParseExpression() {
  DepthGuard guard(this);
  const Token& at = Peek();
  ExprPtr value = ParseOr();
  if (!IsName("if")) return value;
  ++i_;
  auto e = MakeExpr(Expr::Kind::kCond, at);
  e->args.push_back(ParseOr());
  e->args.push_back(std::move(value));
  if (IsName("else")) {
    ++i_;
    e->args.push_back(ParseExpression());
  } else {
    e->args.push_back(nullptr);
  }
  return e;  // args: cond, then, else
}

ExprPtr ExpressionParser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName("or")) {
    const Token& at = Next();
    left = Binary("or", std::move(left), ParseAnd(), at);
  }
  return left;
}
ExprPtr ExpressionParser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName("and")) {
    const Token& at = Next();
    left = Binary("and", std::move(left), ParseNot(), at);
  }
  return left;
}
ExprPtr ExpressionParser::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  DepthGuard guard(this);
  auto e = MakeExpr(Expr::Kind::kUnary, Next());
  e->name = "not";
  e->args.push_back(ParseNot());
  return e;
}
ExprPtr ExpressionParser::ParseCompare() {
  ExprPtr left = ParseMath1();
  while (true) {
    const Token& at = Peek();
    std::string op;
    if (at.kind == TK::kOp && (at.value == "==" || at.value == "!=" || at.value == "<" || at.value == ">" ||
                               at.value == "<=" || at.value == ">=")) {
      op = at.value;
      ++i_;
    } else if (IsName("in")) {
      op = "in";
      ++i_;
    } else if (IsName("not") && IsName("in", 1)) {
      op = "notin";
      i_ += 2;
    } else {
      return left;
    }
    left = Binary(op, std::move(left), ParseMath1(), at);
  }
}
ExprPtr ExpressionParser::ParseMath1() {
  ExprPtr left = ParseConcat();
  while (IsOp("+") || IsOp("-")) {
    const Token& at = Next();
    left = Binary(at.value, std::move(left), ParseConcat(), at);
  }
  return left;
}
ExprPtr ExpressionParser::ParseConcat() {
  ExprPtr left = ParseMath2();
  while (IsOp("~")) {
    const Token& at = Next();
    left = Binary("~", std::move(left), ParseMath2(), at);
  }
  return left;
}
ExprPtr ExpressionParser::ParseMath2() {
  ExprPtr left = ParsePow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const Token& at = Next();
    left = Binary(at.value, std::move(left), ParsePow(), at);
  }
  return left;
}
ExprPtr ExpressionParser::ParsePow() {
  ExprPtr left = ParseUnary(true);
  while (IsOp("**")) {
    const Token& at = Next();
    left = Binary("**", std::move(left), ParseUnary(true), at);
  }
  return left;
}
ExprPtr ExpressionParser::ParseUnary(bool with_filter) {
  DepthGuard guard(this);
  ExprPtr e;
  if (IsOp("-") || IsOp("+")) {
    e = MakeExpr(Expr::Kind::kUnary, Peek());
    e->name = Next().value;
    e->args.push_back(ParseUnary(false));
  } else {
    e = ParsePostfix(ParsePrimary());
  }
  return with_filter ? ParseFilters(std::move(e)) : std::move(e);
}

ExprPtr ExpressionParser::ParsePrimary() {
  DepthGuard guard(this);
  const Token& tok = Peek();
  switch (tok.kind) {
    case TK::kString: {
      std::string s = Next().value;
      while (Peek().kind == TK::kString) s += Next().value;  // adjacent literals concatenate
      return Literal(s, tok);
    }
    case TK::kInt: return Literal(std::stoll(Next().value), tok);
    case TK::kFloat: return Literal(std::stod(Next().value), tok);
    case TK::kName: {
      const std::string& v = tok.value;
      if (v == "true" || v == "True") return ++i_, Literal(true, tok);
      if (v == "false" || v == "False") return ++i_, Literal(false, tok);
      if (v == "none" || v == "None") return ++i_, Literal(nullptr, tok);
      auto e = MakeExpr(Expr::Kind::kName, tok);
      e->name = Next().value;
      return e;
    }
    case TK::kOp:
      if (tok.value == "(") {
        ++i_;
        std::vector<ExprPtr> items;
        bool tuple = false;
        while (!IsOp(")")) {
          items.push_back(ParseExpression());
          if (!IsOp(",")) break;
          tuple = true;
          ++i_;
        }
        ExpectOp(")");
        if (items.size() == 1 && !tuple) return std::move(items[0]);
        auto e = MakeExpr(Expr::Kind::kList, tok);  // tuples are lists here
        e->args = std::move(items);
        return e;
      }
      if (tok.value == "[") {
        ++i_;
        auto e = MakeExpr(Expr::Kind::kList, tok);
        while (!IsOp("]")) {
          e->args.push_back(ParseExpression());
          if (!IsOp(",")) break;
          ++i_;
        }
        ExpectOp("]");
        return e;
      }
      if (tok.value == "{") {
        ++i_;
        auto e = MakeExpr(Expr::Kind::kDict, tok);
        while (!IsOp("}")) {
          e->args.push_back(ParseExpression());
          ExpectOp(":");
          e->args.push_back(ParseExpression());
          if (!IsOp(",")) break;
          ++i_;
        }
        ExpectOp("}");
        return e;
      }
      break;
    default: break;
  }
  Fail(tok, absl::StrCat("unexpected ", Describe(tok), " in expression"));
}

ExprPtr ExpressionParser::ParsePostfix(ExprPtr e) {
  while (true) {
    const Token& at = Peek();
    if (IsOp(".")) {
      ++i_;
      auto a = MakeExpr(Expr::Kind::kAttr, at);
      if (Peek().kind == TK::kInt) {
        a->kind = Expr::Kind::kSubscript;
        a->args.push_back(std::move(e));
        a->args.push_back(Literal(std::stoll(Next().value), at));
      } else {
        a->name = Identifier();
        a->args.push_back(std::move(e));
      }
      e = std::move(a);
    } else if (IsOp("[")) {
      ++i_;
      e = ParseSubscript(std::move(e), at);
    } else if (IsOp("(")) {
      auto c = MakeExpr(Expr::Kind::kCall, at);
      c->args.push_back(std::move(e));
      ParseArgs(c.get());
      e = std::move(c);
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::ParseSubscript(ExprPtr obj, const Token& at) {
  ExprPtr parts[3];
  int colons = 0;
  for (int k = 0; k < 3; ++k) {
    if (!IsOp(":") && !IsOp("]")) parts[k] = ParseExpression();
    if (k < 2 && IsOp(":")) {
      ++i_;
      ++colons;
    } else {
      break;
    }
  }
  ExpectOp("]");
  auto e = MakeExpr(colons == 0 ? Expr::Kind::kSubscript : Expr::Kind::kSlice, at);
  e->args.push_back(std::move(obj));
  if (colons == 0) {
    if (!parts[0]) Fail(at, "empty subscript");
    e->args.push_back(std::move(parts[0]));
  } else {
    for (ExprPtr& p : parts) e->args.push_back(std::move(p));
  }
  return e;
}

// "(a, b, k=v)" into e->args (appended) and e->kwnames/kwargs.
void ExpressionParser::ParseArgs(Expr* e) {
  ExpectOp("(");
  while (!IsOp(")")) {
    if (Peek().kind == TK::kName && IsOp("=", 1)) {
      e->kwnames.push_back(Next().value);
      ++i_;
      e->kwargs.push_back(ParseExpression());
    } else {
      if (!e->kwargs.empty()) Fail(Peek(), "positional argument after keyword argument");
      e->args.push_back(ParseExpression());
    }
    if (!IsOp(",")) break;
    ++i_;
  }
  ExpectOp(")");
}

ExprPtr ExpressionParser::ParseFilterCall(ExprPtr e, const Token& at) {
  auto f = MakeExpr(Expr::Kind::kFilter, at);
  const Token& filter_at = Peek();
  f->name = Identifier();
  if (!soft_ && !FilterNames().count(f->name)) Fail(filter_at, absl::StrCat("no filter named '", f->name, "'"));
  f->args.push_back(std::move(e));
  if (IsOp("(")) ParseArgs(f.get());
  return f;
}

ExprPtr ExpressionParser::ParseFilters(ExprPtr e) {
  while (true) {
    const Token& at = Peek();
    if (IsOp("|")) {
      ++i_;
      e = ParseFilterCall(std::move(e), at);
    } else if (IsName("is")) {
      ++i_;
      auto t = MakeExpr(Expr::Kind::kTest, at);
      if (IsName("not")) {
        ++i_;
        t->negated = true;
      }
      const Token& test_at = Peek();
      t->name = Identifier();
      if (!soft_ && !TestNames().count(t->name)) Fail(test_at, absl::StrCat("no test named '", t->name, "'"));
      t->args.push_back(std::move(e));
      if (IsOp("(")) {
        ParseArgs(t.get());
      } else if (StartsBareTestArg()) {
        t->args.push_back(ParsePostfix(ParsePrimary()));
      }
      e = std::move(t);
    } else {
      return e;
    }
  }
}
bool ExpressionParser::StartsBareTestArg() const {
  static const std::set<std::string> kStop = {"and", "or", "else", "if", "in", "is", "not"};
  const Token& tok = Peek();
  if (tok.kind == TK::kString || tok.kind == TK::kInt || tok.kind == TK::kFloat) return true;
  if (tok.kind == TK::kName) return !kStop.count(tok.value);
  return IsOp("[") || IsOp("{");
}

std::vector<Token> t_;
size_t i_ = 0;
int depth_ = 0;

}  // namespace beacon::jinja::internal
