#include "model/tokenizer/jinja/parser.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/jinja/expression_parser.h"
#include "model/tokenizer/jinja/lexer.h"

namespace beacon::jinja {
namespace {

using internal::SyntaxError;
using internal::TK;

class Parser : public internal::ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  Body ParseBody(const std::set<std::string>& ends, std::string* end) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& tok = Peek();
      if (tok.kind == TK::kEof) {
        if (!ends.empty()) {
          // Name the tag that closes the block ("endfor"), not an
          // alternative such as "else".
          std::string closing = *ends.begin();
          for (const std::string& e : ends) {
            if (e.starts_with("end")) closing = e;
          }
          Fail(tok, absl::StrCat("unexpected end of template; expected '{% ", closing, " %}'"));
        }
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
      SoftFrame soft(this, true);
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
      SoftFrame soft(this, false);
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
      SoftFrame soft(this, false);
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
    if (word == "filter") {
      auto n = MakeNode(Node::Kind::kFilterBlock, kw);
      auto input = std::make_unique<Expr>();
      input->kind = Expr::Kind::kName;
      input->name = kFilterInput;
      input->line = kw.line;
      input->column = kw.column;
      n->expr = ParseFilters(ParseFilterCall(std::move(input), kw));
      ExpectBlockEnd();
      n->body = ParseBody({"endfilter"}, &end);
      ExpectBlockEnd();
      return n;
    }
    Fail(kw, absl::StrCat("unknown or unexpected tag '", word, "'"));
  }

  // Sets soft_ for a scope (see ExpressionParser::soft_).
  struct SoftFrame {
    SoftFrame(Parser* p, bool soft) : p(p), saved(p->soft_) { p->soft_ = soft; }
    ~SoftFrame() { p->soft_ = saved; }
    Parser* p;
    bool saved;
  };
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
