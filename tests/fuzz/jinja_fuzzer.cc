// libFuzzer target for the Jinja engine (model/tokenizer/jinja/) and the
// chat-template path a request takes (model/tokenizer/chat_template.h): both
// see untrusted input, a model file's or --chat-template's source, and a
// client's messages and chat_template_kwargs.
//
// The first byte picks what the rest is:
//   - even: a template source. It must parse or fail with a Status; when it
//     parses it is rendered with a small conversation, so that loops,
//     filters, macros and tests run on real values.
//   - odd: a JSON document, the client's side: {"messages": [...],
//     "kwargs": {...}} or a bare message array. It is rendered through one of
//     the real chat templates of tests/fixtures/chat_templates (picked by the
//     second byte), as a chat request renders it.
// Every render runs under RenderLimits well below the server's, so a loop or
// a recursive macro ends with a Status instead of a timeout. JSON deeper than
// the server's 64 levels is skipped: the server refuses it before parsing
// (server/http/json_limits.h).
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/jinja_corpus in
// ordinary builds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/jinja/template.h"
#include "tests/fuzz/json_depth.h"

#ifndef BEACON_SOURCE_DIR
#error "BEACON_SOURCE_DIR must name the source tree (the real chat templates are read from it)"
#endif

namespace {

using beacon::jinja::Json;

const beacon::jinja::RenderLimits& Limits() {
  static const beacon::jinja::RenderLimits limits{/*max_call_depth=*/20, /*max_iterations=*/20'000,
                                                  /*max_output_bytes=*/1 << 20};
  return limits;
}

// The real templates, sorted by file name so that a corpus input picks the
// same one on every machine.
const std::vector<beacon::ChatTemplate>& RealTemplates() {
  static const std::vector<beacon::ChatTemplate> templates = [] {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(BEACON_SOURCE_DIR "/tests/fixtures/chat_templates")) {
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    std::vector<beacon::ChatTemplate> out;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      auto t = beacon::ChatTemplate::FromSource(source, "<s>", "</s>");
      if (t.ok()) out.push_back(*std::move(t));
    }
    if (out.empty()) __builtin_trap();  // a broken fixture path must not fuzz nothing
    return out;
  }();
  return templates;
}

const Json& Conversation() {
  static const Json vars = Json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "What is 2 + 2?"},
                 {"role": "assistant", "content": "4", "reasoning_content": "2 and 2 make 4."},
                 {"role": "user", "content": "And 3 + 3?"}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]})");
  return vars;
}

void FuzzSource(std::string_view source) {
  absl::StatusOr<beacon::jinja::Template> t = beacon::jinja::Template::Parse(source);
  if (!t.ok()) return;
  volatile size_t sink = 0;
  if (auto out = t->Render(Conversation(), Limits(), /*now=*/0); out.ok()) sink = sink + out->size();
}

void FuzzClientSide(uint8_t pick, std::string_view text) {
  if (beacon::fuzz::JsonDepth(text) > beacon::fuzz::kMaxJsonDepth) return;
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return;
  Json messages = doc, kwargs = Json::object();
  if (doc.is_object()) {
    messages = doc.contains("messages") ? doc["messages"] : Json::array();
    if (doc.contains("kwargs") && doc["kwargs"].is_object()) kwargs = doc["kwargs"];
  }
  const std::vector<beacon::ChatTemplate>& templates = RealTemplates();
  const beacon::ChatTemplate& t = templates[pick % templates.size()];
  volatile size_t sink = 0;
  // The server hands the template a JSON array of message objects; anything
  // else must fail with a Status too.
  if (auto out = t.RenderJson(messages, (pick & 0x80) != 0, kwargs); out.ok()) sink = sink + out->size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzSource(rest);
  } else {
    FuzzClientSide(static_cast<uint8_t>(rest[0]), rest.substr(1));
  }
  return 0;
}
