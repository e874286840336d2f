// Walks a parsed template (ast.h) with jinja2's semantics: scopes (a for
// loop's body is its own scope, as in jinja2, hence namespace()), macros,
// loop variables, loop controls. Hostile templates are bounded: macro call
// depth, loop iterations and output size each have a limit, past which
// rendering stops with a RenderError.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_RENDERER_H_
#define BEACON_MODEL_TOKENIZER_JINJA_RENDERER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer/jinja/ast.h"
#include "model/tokenizer/jinja/value.h"

namespace beacon::jinja {

struct RenderLimits {
  int max_call_depth = 40;             // nested macro calls
  int64_t max_iterations = 1'000'000;  // loop iterations, all loops together
  size_t max_output_bytes = 64 << 20;  // rendered text, and any one string built
};

class Renderer {
 public:
  // `vars`: the template's variables (and global functions), the root scope.
  Renderer(std::map<std::string, Value> vars, RenderLimits limits);

  // Raises RenderError (value.h) on a template error.
  void Render(const Body& body, std::string* out);

 private:
  using Frame = std::map<std::string, Value>;
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, std::string* out);
  Flow ExecNode(const Node& node, std::string* out);
  void ExecFor(const Node& node, std::string* out);
  void DefineMacro(const Node& node);
  Value Eval(const Expr& e);
  Value EvalInner(const Expr& e);
  Value EvalCall(const Expr& e);
  Value EvalBinary(const Expr& e);
  CallArgs EvalArgs(const Expr& e, size_t first);
  Value LookupName(const std::string& name) const;
  void Assign(const std::string& name, Value value);
  void Append(std::string* out, const std::string& text) const;
  void CountIteration();

  std::vector<std::shared_ptr<Frame>> scopes_;  // [0] is the root
  RenderLimits limits_;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_RENDERER_H_
