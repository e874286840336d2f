// The expression half of the parser: jinja2's precedence, lowest first:
// `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **,
// unary - +, then postfix (attribute, subscript, slice, call) and filters /
// tests.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_EXPRESSION_PARSER_H_
#define BEACON_MODEL_TOKENIZER_JINJA_EXPRESSION_PARSER_H_

#include <vector>

#include "model/tokenizer/jinja/parser_base.h"

namespace beacon::jinja::internal {

class ExpressionParser : public ParserBase {
 public:
  using ParserBase::ParserBase;

 protected:
  ExprPtr ParseExpression();
  // Without the conditional expression (a for loop's iterable, where `if`
  // starts its filter).
  ExprPtr ParseOr();
  // `| f(...)` and `is t` applied to `e`, as many as follow.
  ExprPtr ParseFilters(ExprPtr e);
  // `f(...)` (after its '|') applied to `e`.
  ExprPtr ParseFilterCall(ExprPtr e, const Token& at);

  // In an if's conditions and bodies, and not in a loop or macro nested in
  // them: jinja2's "soft" frame, where an unknown filter or test is an error
  // only if rendering reaches it (a template may guard a filter only some
  // runtimes have); elsewhere it is a parse error, as in jinja2.
  bool soft_ = false;

 private:
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr e);
  ExprPtr ParseSubscript(ExprPtr obj, const Token& at);
  void ParseArgs(Expr* e);
  bool StartsBareTestArg() const;
};

}  // namespace beacon::jinja::internal

#endif  // BEACON_MODEL_TOKENIZER_JINJA_EXPRESSION_PARSER_H_
