// Tool calls out of a model's answer (never its reasoning: the reasoning is
// split off before, engine/reasoning.h), in the format of its template
// (tool_format.h). A call that does not parse (broken JSON, a name that is
// not among the request's tools, arguments that are not an object) stays in
// the text as the model wrote it: a malformed call is returned as content,
// never as an error.
//
// ParseToolCalls reads a whole answer; ToolCallStream the same answer as it
// streams, holding back only what may be the start of a call, and handing
// out each call whole once its end is seen (OpenAI's stream then sends it
// as one tool_calls delta with the complete arguments).
#ifndef BEACON_ENGINE_TOOLS_TOOL_PARSER_H_
#define BEACON_ENGINE_TOOLS_TOOL_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include "engine/tools/tool_format.h"

namespace beacon {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object, compact
};

struct ParsedAnswer {
  std::string content;  // the text outside the calls (the calls' own text removed)
  std::vector<ParsedToolCall> calls;
};

// A new call's id, as OpenAI makes them: "call_" and 24 random hex digits.
std::string NewToolCallId();

// `tools`: the names a call may have.
ParsedAnswer ParseToolCalls(ToolCallFormat format, std::string_view text, const std::vector<std::string>& tools);

class ToolCallStream {
 public:
  ToolCallStream(ToolCallFormat format, std::vector<std::string> tools);

  // Feeds the next piece of the answer's text; returns what can be handed
  // out now.
  ParsedAnswer Push(std::string_view text);
  // The answer ended: everything held back (an unfinished call is text).
  ParsedAnswer Finish();
  // Calls handed out so far.
  int calls() const { return calls_; }

 private:
  ParsedAnswer Drain(bool final);

  ToolCallFormat format_;
  std::vector<std::string> tools_;
  std::string held_;           // text not handed out yet
  bool started_ = false;       // llama3_json: the answer's first non-space character was seen
  bool whole_answer_ = false;  // llama3_json: the answer is a call list, parsed at the end
  int calls_ = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_TOOLS_TOOL_PARSER_H_
