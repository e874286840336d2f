// The expression half of the parser: jinja2's precedence, lowest first:
// `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **,
// unary - +, then postfix (attribute, subscript, slice, call) and filters /
// tests.
#ifndef BEACON_ENGINE_TOKENIZER_JINJA_EXPRESSION_PARSER_H_
#define BEACON_ENGINE_TOKENIZER_JINJA_EXPRESSION_PARSER_H_

#include <vector>

#include "engine/tokenizer/jinja/parser_base.h"

namespace beacon::jinja::internal {

class ExpressionParser : public ParserBase {
 public:
  using ParserBase::ParserBase;

 protected:
  ExprPtr ParseExpression();
  // Without the conditional expression (a for loop's iterable, where `if`
  // starts its filter).
  ExprPtr ParseOr();

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
  ExprPtr ParseFilters(ExprPtr e);
  bool StartsBareTestArg() const;
};

}  // namespace beacon::jinja::internal

#endif  // BEACON_ENGINE_TOKENIZER_JINJA_EXPRESSION_PARSER_H_
