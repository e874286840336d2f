#include "engine/tokenizer/jinja/parser.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/jinja/lexer.h"

namespace beacon::jinja {
namespace {

using TK = Token::Kind;

// Internal to this file: a syntax error unwinds to Parse(), which returns it
// as a Status.
struct SyntaxError {
  std::string message;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kOp && Peek(ahead).value == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kName && Peek(ahead).value == name;
  }

  [[noreturn]] void Fail(const Token& at, const std::string& what) const {
    throw SyntaxError{absl::StrCat("template line ", at.line, ", column ", at.column, ": ", what)};
  }
  static std::string Describe(const Token& tok) {
    switch (tok.kind) {
      case TK::kEof: return "end of template";
      case TK::kBlockEnd: return "'%}'";
      case TK::kVarEnd: return "'}}'";
      case TK::kText: return "template text";
      case TK::kString: return "a string";
      default: return absl::StrCat("'", tok.value, "'");
    }
  }
  void ExpectOp(std::string_view op) {
    if (!IsOp(op)) Fail(Peek(), absl::StrCat("expected '", std::string(op), "', got ", Describe(Peek())));
    ++i_;
  }
  void ExpectName(std::string_view name) {
    if (!IsName(name)) Fail(Peek(), absl::StrCat("expected '", std::string(name), "', got ", Describe(Peek())));
    ++i_;
  }
  std::string Identifier() {
    if (Peek().kind != TK::kName) Fail(Peek(), absl::StrCat("expected a name, got ", Describe(Peek())));
    return Next().value;
  }
  void ExpectBlockEnd() {
    if (Peek().kind != TK::kBlockEnd) Fail(Peek(), absl::StrCat("expected '%}', got ", Describe(Peek())));
    ++i_;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxParseDepth) p->Fail(p->Peek(), "template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  // Statements until one of `ends` (a block tag name); *end gets it ("" at EOF,
  // allowed only when `ends` is empty).
  Body ParseBody(const std::set<std::string>& ends, std::string* end) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& tok = Peek();
      if (tok.kind == TK::kEof) {
        if (!ends.empty()) Fail(tok, absl::StrCat("unexpected end of template; expected '{% ", *ends.begin(), " %}'"));
        *end = "";
        return body;
      }
      if (tok.kind == TK::kText) {
        auto n = MakeNode(Node::Kind::kText, tok);
        n->text = Next().value;
        body.push_back(std::move(n));
      } else if (tok.kind == TK::kVarBegin) {
        ++i_;
        auto n = MakeNode(Node::Kind::kOutput, tok);
        n->expr = ParseExpression();
        if (Peek().kind != TK::kVarEnd) Fail(Peek(), absl::StrCat("expected '}}', got ", Describe(Peek())));
        ++i_;
        body.push_back(std::move(n));
      } else if (tok.kind == TK::kBlockBegin) {
        const Token& name = Peek(1);
        if (name.kind == TK::kName && ends.count(name.value)) {
          i_ += 2;
          *end = name.value;
          return body;
        }
        ++i_;
        if (auto n = ParseStatement()) body.push_back(std::move(n));
      } else {
        Fail(tok, absl::StrCat("unexpected ", Describe(tok)));
      }
    }
  }

  std::unique_ptr<Node> MakeNode(Node::Kind kind, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = at.line;
    n->column = at.column;
    return n;
  }

  std::unique_ptr<Node> ParseStatement() {
    const Token& kw = Peek();
    const std::string word = Identifier();
    std::string end;
    if (word == "if") {
      auto n = MakeNode(Node::Kind::kIf, kw);
      n->conditions.push_back(ParseExpression());
      ExpectBlockEnd();
      while (true) {
        n->bodies.push_back(ParseBody({"elif", "else", "endif"}, &end));
        if (end != "elif") break;
        n->conditions.push_back(ParseExpression());
        ExpectBlockEnd();
      }
      if (end == "else") {
        ExpectBlockEnd();
        n->else_body = ParseBody({"endif"}, &end);
      }
      ExpectBlockEnd();
      return n;
    }
    if (word == "for") {
      auto n = MakeNode(Node::Kind::kFor, kw);
      const bool paren = IsOp("(");
      if (paren) ++i_;
      n->targets.push_back(Identifier());
      while (IsOp(",")) {
        ++i_;
        n->targets.push_back(Identifier());
      }
      if (paren) ExpectOp(")");
      ExpectName("in");
      n->expr = ParseOr();
      if (IsName("if")) {
        ++i_;
        n->filter = ParseExpression();
      }
      if (IsName("recursive")) Fail(Peek(), "recursive loops are not supported");
      ExpectBlockEnd();
      n->body = ParseBody({"else", "endfor"}, &end);
      if (end == "else") {
        ExpectBlockEnd();
        n->else_body = ParseBody({"endfor"}, &end);
      }
      ExpectBlockEnd();
      return n;
    }
    if (word == "set") {
      auto n = MakeNode(Node::Kind::kSet, kw);
      n->targets.push_back(Identifier());
      if (IsOp(".")) {
        ++i_;
        n->attr = Identifier();
      } else {
        while (IsOp(",")) {
          ++i_;
          n->targets.push_back(Identifier());
        }
      }
      if (Peek().kind == TK::kBlockEnd && n->targets.size() == 1 && n->attr.empty()) {
        ++i_;
        n->body = ParseBody({"endset"}, &end);
        ExpectBlockEnd();
        return n;
      }
      ExpectOp("=");
      n->expr = ParseExpression();
      ExpectBlockEnd();
      return n;
    }
    if (word == "macro") {
      auto n = MakeNode(Node::Kind::kMacro, kw);
      n->name = Identifier();
      ExpectOp("(");
      while (!IsOp(")")) {
        n->params.push_back(Identifier());
        ExprPtr def;
        if (IsOp("=")) {
          ++i_;
          def = ParseExpression();
        }
        n->defaults.push_back(std::move(def));
        if (!IsOp(",")) break;
        ++i_;
      }
      ExpectOp(")");
      ExpectBlockEnd();
      n->body = ParseBody({"endmacro"}, &end);
      if (Peek().kind == TK::kName) ++i_;  // {% endmacro name %}
      ExpectBlockEnd();
      return n;
    }
    if (word == "break" || word == "continue") {
      auto n = MakeNode(word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, kw);
      ExpectBlockEnd();
      return n;
    }
    if (word == "generation") {
      // HF's {% generation %} marks assistant text for masks; it renders its body.
      ExpectBlockEnd();
      auto n = MakeNode(Node::Kind::kIf, kw);
      n->conditions.push_back(Literal(true, kw));
      n->bodies.push_back(ParseBody({"endgeneration"}, &end));
      ExpectBlockEnd();
      return n;
    }
    Fail(kw, absl::StrCat("unknown or unexpected tag '", word, "'"));
  }

  ExprPtr MakeExpr(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  ExprPtr Literal(Json value, const Token& at) {
    auto e = MakeExpr(Expr::Kind::kLiteral, at);
    e->literal = std::move(value);
    return e;
  }
  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, const Token& at) {
    auto e = MakeExpr(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseExpression() {
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

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      const Token& at = Next();
      left = Binary("or", std::move(left), ParseAnd(), at);
    }
    return left;
  }
  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      const Token& at = Next();
      left = Binary("and", std::move(left), ParseNot(), at);
    }
    return left;
  }
  ExprPtr ParseNot() {
    if (!IsName("not")) return ParseCompare();
    DepthGuard guard(this);
    auto e = MakeExpr(Expr::Kind::kUnary, Next());
    e->name = "not";
    e->args.push_back(ParseNot());
    return e;
  }
  ExprPtr ParseCompare() {
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
  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& at = Next();
      left = Binary(at.value, std::move(left), ParseConcat(), at);
    }
    return left;
  }
  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      const Token& at = Next();
      left = Binary("~", std::move(left), ParseMath2(), at);
    }
    return left;
  }
  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& at = Next();
      left = Binary(at.value, std::move(left), ParsePow(), at);
    }
    return left;
  }
  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      const Token& at = Next();
      left = Binary("**", std::move(left), ParseUnary(true), at);
    }
    return left;
  }
  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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

  ExprPtr ParsePostfix(ExprPtr e) {
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

  ExprPtr ParseSubscript(ExprPtr obj, const Token& at) {
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
  void ParseArgs(Expr* e) {
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

  ExprPtr ParseFilters(ExprPtr e) {
    while (true) {
      const Token& at = Peek();
      if (IsOp("|")) {
        ++i_;
        auto f = MakeExpr(Expr::Kind::kFilter, at);
        f->name = Identifier();
        f->args.push_back(std::move(e));
        if (IsOp("(")) ParseArgs(f.get());
        e = std::move(f);
      } else if (IsName("is")) {
        ++i_;
        auto t = MakeExpr(Expr::Kind::kTest, at);
        if (IsName("not")) {
          ++i_;
          t->negated = true;
        }
        t->name = Identifier();
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
  bool StartsBareTestArg() const {
    static const std::set<std::string> kStop = {"and", "or", "else", "if", "in", "is", "not"};
    const Token& tok = Peek();
    if (tok.kind == TK::kString || tok.kind == TK::kInt || tok.kind == TK::kFloat) return true;
    if (tok.kind == TK::kName) return !kStop.count(tok.value);
    return IsOp("[") || IsOp("{");
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(source);
  if (!tokens.ok()) return tokens.status();
  try {
    Parser parser(*std::move(tokens));
    return parser.ParseTemplate();
  } catch (const SyntaxError& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const std::exception& e) {  // std::stoll/stod on an out-of-range literal
    return absl::InvalidArgumentError(absl::StrCat("template: bad literal (", e.what(), ")"));
  }
}

}  // namespace beacon::jinja
