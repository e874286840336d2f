// The Jinja2 syntax tree the parser builds and the renderer walks. Nodes
// own their children; positions are kept for error messages.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_AST_H_
#define BEACON_MODEL_TOKENIZER_JINJA_AST_H_

#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace beacon::jinja {

// Python-like values keep insertion order, as Python's dicts do.
using Json = nlohmann::ordered_json;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // args
    kDict,       // args: key, value, key, value...
    kAttr,       // args[0].name
    kSubscript,  // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]] (each may be null)
    kCall,       // args[0](args[1..], kwnames=kwargs)
    kFilter,     // args[0] | name(args[1..], kwargs)
    kTest,       // args[0] is [not] name(args[1..])
    kUnary,      // name in {"-", "+", "not"}: name args[0]
    kBinary,     // args[0] name args[1]; name: + - * / // % ** ~ == != < > <= >= in notin and or
    kCond,       // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  int column = 0;
  Json literal;
  std::string name;
  bool negated = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::string> kwnames;
  std::vector<ExprPtr> kwargs;
};

// The name a filter block's expr reads its rendered body from (no template
// can spell it: it has a space).
inline constexpr char kFilterInput[] = " filter input";

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // branches (conditions[i] -> bodies[i]); else_body
    kFor,     // for targets in expr [if filter]: body; else_body
    kSet,     // targets = expr, or targets[0].attr = expr, or a block set (body)
    kMacro,   // name(params = defaults) body
    kBreak,
    kContinue,
    kFilterBlock,  // {% filter f %}body{% endfilter %}: expr, the filters applied to kFilterInput
  };
  Kind kind = Kind::kText;
  int line = 0;
  int column = 0;
  std::string text;
  std::string name;
  std::string attr;  // kSet: "ns.attr = ..."
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // parallel to params; null when none
};

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_AST_H_
