#include "server/openai/openai_structured.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/http/json_fields.h"

namespace beacon {
namespace {

// Ordered: a schema's properties keep the client's order, which a strict
// grammar generates them in (as OpenAI's structured outputs do).
using json = nlohmann::ordered_json;

absl::Status GetJsonBool(const json& j, const char* field, bool* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return FieldError(field, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

GrammarSpec Spec(GrammarKind kind, std::string source, std::string field) {
  GrammarSpec s;
  s.kind = kind;
  s.source = std::move(source);
  s.field = std::move(field);
  return s;
}

// A schema given as an object, or as JSON text holding one.
absl::StatusOr<std::string> SchemaText(const json& v, const std::string& field) {
  if (v.is_object()) return v.dump();
  if (v.is_string()) {
    const json parsed = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) return parsed.dump();
  }
  return FieldError(field, "must be a JSON schema (an object)");
}

absl::Status ParseResponseFormat(const json& rf, ServeRequest* r) {
  if (!rf.is_object()) return FieldError("response_format", "must be an object with a type");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) return FieldError("response_format.type", "must be a string");
  const std::string t = type->get<std::string>();
  if (t == "text") return absl::OkStatus();
  if (t == "json_object") {
    r->structured = Spec(GrammarKind::kJsonObject, "", "response_format");
    return absl::OkStatus();
  }
  if (t == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object()) {
      return FieldError("response_format.json_schema", "must be an object with name and schema");
    }
    auto schema = js->find("schema");
    // OpenAI's name is required; a missing schema means any JSON object.
    if (auto name = js->find("name"); name != js->end() && !name->is_string()) {
      return FieldError("response_format.json_schema.name", "must be a string");
    }
    bool strict = false;
    if (absl::Status s = GetJsonBool(*js, "strict", &strict); !s.ok()) {
      return FieldError("response_format.json_schema.strict", "must be true or false");
    }
    if (schema == js->end() || schema->is_null()) {
      r->structured = Spec(GrammarKind::kJsonObject, "", "response_format.json_schema");
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> text = SchemaText(*schema, "response_format.json_schema.schema");
    if (!text.ok()) return text.status();
    r->structured = Spec(GrammarKind::kJsonSchema, *std::move(text), "response_format.json_schema.schema");
    r->structured->strict = strict;
    return absl::OkStatus();
  }
  if (t == "structural_tag") {
    if (!rf.contains("format")) return FieldError("response_format.format", "is required for structural_tag");
    r->structured = Spec(GrammarKind::kStructuralTag, rf.dump(), "response_format");
    return absl::OkStatus();
  }
  return FieldError("response_format.type",
                    absl::StrCat("'", t.substr(0, 64), "' is not text, json_object, json_schema or structural_tag"));
}

absl::Status ParseStructuredOutputs(const json& so, ServeRequest* r) {
  if (!so.is_object()) return FieldError("structured_outputs", "must be an object");
  int given = 0;
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    const std::string f = "structured_outputs." + key;
    if (key == "json") {
      absl::StatusOr<std::string> text = SchemaText(value, f);
      if (!text.ok()) return text.status();
      r->structured = Spec(GrammarKind::kJsonSchema, *std::move(text), f);
    } else if (key == "regex" || key == "grammar") {
      if (!value.is_string()) return FieldError(f, "must be a string");
      r->structured = Spec(key == "regex" ? GrammarKind::kRegex : GrammarKind::kEbnf, value.get<std::string>(), f);
    } else if (key == "choice") {
      if (!value.is_array()) return FieldError(f, "must be a list of strings");
      GrammarSpec s = Spec(GrammarKind::kChoice, "", f);
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string()) return FieldError(absl::StrCat(f, "[", i, "]"), "must be a string");
        s.choices.push_back(value[i].get<std::string>());
      }
      r->structured = std::move(s);
    } else if (key == "json_object") {
      if (!value.is_boolean()) return FieldError(f, "must be true or false");
      if (!value.get<bool>()) continue;
      r->structured = Spec(GrammarKind::kJsonObject, "", f);
    } else if (key == "structural_tag") {
      const json tag = value.is_string() ? json::parse(value.get<std::string>(), nullptr, false) : value;
      if (!tag.is_object()) return FieldError(f, "must be a structural tag (an object)");
      r->structured = Spec(GrammarKind::kStructuralTag, tag.dump(), f);
    } else {
      return FieldError(f, "unrecognized (json, regex, choice, grammar, json_object and structural_tag are)");
    }
    ++given;
  }
  if (given > 1) return FieldError("structured_outputs", "give one of json, regex, choice, grammar, json_object");
  return absl::OkStatus();
}

// One tool: {"type": "function", "function": {"name", "description", "parameters", "strict"}}
// (or, for the deprecated `functions`, the inner object itself).
absl::Status ParseFunction(const json& fn, const std::string& f, ToolDefinition* t) {
  if (!fn.is_object()) return FieldError(f, "must be an object with a name");
  auto name = fn.find("name");
  if (name == fn.end() || !name->is_string()) return FieldError(f + ".name", "must be a string");
  t->name = name->get<std::string>();
  if (auto d = fn.find("description"); d != fn.end() && !d->is_null()) {
    if (!d->is_string()) return FieldError(f + ".description", "must be a string");
    t->description = d->get<std::string>();
  }
  if (auto p = fn.find("parameters"); p != fn.end() && !p->is_null()) {
    if (!p->is_object()) return FieldError(f + ".parameters", "must be a JSON schema (an object)");
    t->parameters = p->dump();
  }
  if (absl::Status s = GetJsonBool(fn, "strict", &t->strict); !s.ok())
    return FieldError(f + ".strict", "must be true or false");
  return absl::OkStatus();
}

absl::Status ParseToolChoice(const json& c, const char* field, ToolChoice* out) {
  if (c.is_string()) {
    const std::string v = c.get<std::string>();
    if (v == "none")
      out->mode = ToolChoice::Mode::kNone;
    else if (v == "auto")
      out->mode = ToolChoice::Mode::kAuto;
    else if (v == "required")
      out->mode = ToolChoice::Mode::kRequired;
    else
      return FieldError(field, absl::StrCat("'", v.substr(0, 64), "' is not none, auto, required or a function"));
    return absl::OkStatus();
  }
  // {"type": "function", "function": {"name": ...}}, or function_call's {"name": ...}.
  const json* fn = &c;
  if (c.is_object() && c.contains("function")) fn = &c["function"];
  if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
    return FieldError(field, "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  out->mode = ToolChoice::Mode::kNamed;
  out->name = (*fn)["name"].get<std::string>();
  return absl::OkStatus();
}

absl::Status ParseTools(const json& j, ServeRequest* r) {
  ToolRequest& t = r->tools;
  const bool legacy = j.contains("functions") && !j["functions"].is_null();
  if (legacy && j.contains("tools") && !j["tools"].is_null()) {
    return FieldError("functions", "is the deprecated form of tools: send one of them");
  }
  const char* list_field = legacy ? "functions" : "tools";
  if (auto it = j.find(list_field); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return FieldError(list_field, "must be a list of tools");
    // Sizes are PrepareRequest's; the body limit bounds the count here.
    for (size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      ToolDefinition d;
      if (legacy) {
        if (absl::Status s = ParseFunction(e, absl::StrCat("functions[", i, "]"), &d); !s.ok()) return s;
      } else {
        const std::string f = absl::StrCat("tools[", i, "]");
        if (!e.is_object() || e.value("type", "") != "function") {
          return FieldError(f + ".type", "only tools of type \"function\" are supported");
        }
        if (absl::Status s = ParseFunction(e.value("function", json()), f + ".function", &d); !s.ok()) return s;
      }
      t.tools.push_back(std::move(d));
    }
  }
  const char* choice_field = legacy ? "function_call" : "tool_choice";
  if (auto it = j.find(choice_field); it != j.end() && !it->is_null()) {
    if (absl::Status s = ParseToolChoice(*it, choice_field, &t.choice); !s.ok()) return s;
  } else if (t.tools.empty()) {
    t.choice.mode = ToolChoice::Mode::kNone;
  }
  if (absl::Status s = GetJsonBool(j, "parallel_tool_calls", &t.parallel); !s.ok()) return s;
  if (legacy) t.parallel = false;  // functions made one call at a time
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseStructuredFields(const nlohmann::ordered_json& j, OpenAiEndpoint endpoint, ServeRequest* r) {
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
    if (absl::Status s = ParseResponseFormat(*it, r); !s.ok()) return s;
  }
  if (auto it = j.find("structured_outputs"); it != j.end() && !it->is_null()) {
    if (r->structured.has_value()) return FieldError("structured_outputs", "not with response_format: send one");
    if (absl::Status s = ParseStructuredOutputs(*it, r); !s.ok()) return s;
  }
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    if (absl::Status s = ParseTools(j, r); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ParseMessageToolFields(const nlohmann::json& m, const std::string& f, ChatMessage* msg) {
  if (auto it = m.find("tool_calls"); it != m.end() && !it->is_null()) {
    if (!it->is_array()) return FieldError(f + ".tool_calls", "must be a list");
    for (size_t k = 0; k < it->size(); ++k) {
      const json& c = (*it)[k];
      const std::string cf = absl::StrCat(f, ".tool_calls[", k, "]");
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
        return FieldError(cf, "must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
      }
      const json& fn = c["function"];
      ChatToolCall call;
      if (auto id = c.find("id"); id != c.end() && !id->is_null()) {
        if (!id->is_string()) return FieldError(cf + ".id", "must be a string");
        call.id = id->get<std::string>();
      }
      if (!fn.contains("name") || !fn["name"].is_string()) return FieldError(cf + ".function.name", "must be a string");
      call.name = fn["name"].get<std::string>();
      // OpenAI sends the arguments as JSON text; an object is taken too.
      if (auto a = fn.find("arguments"); a != fn.end() && !a->is_null()) {
        if (a->is_string())
          call.arguments = a->get<std::string>();
        else if (a->is_object())
          call.arguments = a->dump();
        else
          return FieldError(cf + ".function.arguments", "must be a JSON object's text");
      } else {
        call.arguments = "{}";
      }
      msg->tool_calls.push_back(std::move(call));
    }
  }
  for (const char* key : {"tool_call_id", "name"}) {
    if (auto it = m.find(key); it != m.end() && !it->is_null()) {
      if (!it->is_string()) return FieldError(f + "." + key, "must be a string");
      (std::string(key) == "name" ? msg->name : msg->tool_call_id) = it->get<std::string>();
    }
  }
  return absl::OkStatus();
}

}  // namespace beacon
