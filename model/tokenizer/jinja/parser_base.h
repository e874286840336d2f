// Internal to the parser (parser.cc, expression_parser.cc): the token
// cursor, error reporting and node construction both parsers share.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_PARSER_BASE_H_
#define BEACON_MODEL_TOKENIZER_JINJA_PARSER_BASE_H_

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/jinja/ast.h"
#include "model/tokenizer/jinja/lexer.h"
#include "model/tokenizer/jinja/parser.h"

namespace beacon::jinja::internal {

using TK = Token::Kind;

// A syntax error unwinds to Parse(), which returns it as a Status; it never
// leaves the parser.
struct SyntaxError {
  std::string message;
};

class ParserBase {
 public:
  explicit ParserBase(std::vector<Token> tokens) : t_(std::move(tokens)) {}

 protected:
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
    explicit DepthGuard(ParserBase* p) : p(p) {
      if (++p->depth_ > kMaxParseDepth) p->Fail(p->Peek(), "template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
    ParserBase* p;
  };

  // Statements until one of `ends` (a block tag name); *end gets it ("" at EOF,
  // allowed only when `ends` is empty).
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

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace beacon::jinja::internal

#endif  // BEACON_MODEL_TOKENIZER_JINJA_PARSER_BASE_H_
