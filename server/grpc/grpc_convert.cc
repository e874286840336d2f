#include "server/grpc/grpc_convert.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace beacon {
namespace {

std::vector<ChatMessage> Messages(const v1::ChatInput& chat) {
  std::vector<ChatMessage> out;
  out.reserve(chat.messages_size());
  for (const v1::ChatMessage& m : chat.messages()) {
    out.emplace_back(m.role(), m.content(),
                     m.has_reasoning_content() ? std::optional<std::string>(m.reasoning_content()) : std::nullopt);
    for (const v1::ToolCall& c : m.tool_calls()) out.back().tool_calls.push_back({c.id(), c.name(), c.arguments()});
    out.back().tool_call_id = m.tool_call_id();
    out.back().name = m.name();
  }
  return out;
}

jinja::Json ToJson(const google::protobuf::Value& v);

// A protobuf map has no order; the object's names are sorted at every level,
// as HTTP's JSON (nlohmann::json) has them, so both APIs render alike.
jinja::Json ToJson(const google::protobuf::Map<std::string, google::protobuf::Value>& fields) {
  std::map<std::string, const google::protobuf::Value*> sorted;
  for (const auto& [k, v] : fields) sorted[k] = &v;
  jinja::Json o = jinja::Json::object();
  for (const auto& [k, v] : sorted) o[k] = ToJson(*v);
  return o;
}

// google.protobuf.Value -> JSON, for template variables. Depth is bounded
// by gRPC's own message parsing (protobuf's recursion limit).
jinja::Json ToJson(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue: return nullptr;
    case google::protobuf::Value::kNumberValue: {
      // JSON has one number type; templates compare integers as integers.
      // The range check comes first: casting NaN, inf or |d| >= 2^63 to an
      // integer is undefined. NaN and inf stay doubles.
      const double d = v.number_value();
      if (d > -9.0e15 && d < 9.0e15 && d == std::trunc(d)) return static_cast<int64_t>(d);
      return d;
    }
    case google::protobuf::Value::kStringValue: return v.string_value();
    case google::protobuf::Value::kBoolValue: return v.bool_value();
    case google::protobuf::Value::kStructValue: return ToJson(v.struct_value().fields());
    case google::protobuf::Value::kListValue: {
      jinja::Json a = jinja::Json::array();
      for (const google::protobuf::Value& e : v.list_value().values()) a.push_back(ToJson(e));
      return a;
    }
    case google::protobuf::Value::KIND_NOT_SET: break;
  }
  return nullptr;
}

void ReadChat(const v1::ChatInput& chat, ServeRequest* r) {
  r->input = ServeRequest::Input::kChat;
  r->messages = Messages(chat);
  r->add_generation_prompt = !chat.has_add_generation_prompt() || chat.add_generation_prompt();
  if (!chat.chat_template_kwargs().empty()) r->chat_template_kwargs = ToJson(chat.chat_template_kwargs());
  for (const v1::Tool& t : chat.tools()) {
    r->tools.tools.push_back({t.name(), t.description(), t.parameters().empty() ? "{}" : t.parameters(), t.strict()});
  }
  const v1::ToolChoice& c = chat.tool_choice();
  if (c.choice_case() == v1::ToolChoice::kFunction) {
    r->tools.choice = {ToolChoice::Mode::kNamed, c.function()};
  } else {
    switch (c.mode()) {
      case v1::TOOL_CHOICE_MODE_NONE: r->tools.choice.mode = ToolChoice::Mode::kNone; break;
      case v1::TOOL_CHOICE_MODE_REQUIRED: r->tools.choice.mode = ToolChoice::Mode::kRequired; break;
      default: r->tools.choice.mode = ToolChoice::Mode::kAuto; break;
    }
  }
  r->tools.parallel = !chat.has_parallel_tool_calls() || chat.parallel_tool_calls();
  r->tools.constrain_auto = chat.constrain_tool_calls();
  r->reasoning_effort = chat.reasoning_effort();
}

// StructuredOutput -> the request's grammar; fields are named as in the proto.
void ReadStructured(const v1::StructuredOutput& so, ServeRequest* r) {
  GrammarSpec s;
  s.strict = so.strict();
  switch (so.format_case()) {
    case v1::StructuredOutput::kJsonSchema:
      s.kind = GrammarKind::kJsonSchema;
      s.source = so.json_schema();
      break;
    case v1::StructuredOutput::kJsonObject:
      if (!so.json_object()) return;
      s.kind = GrammarKind::kJsonObject;
      break;
    case v1::StructuredOutput::kRegex:
      s.kind = GrammarKind::kRegex;
      s.source = so.regex();
      break;
    case v1::StructuredOutput::kGrammar:
      s.kind = GrammarKind::kEbnf;
      s.source = so.grammar();
      break;
    case v1::StructuredOutput::kChoice:
      s.kind = GrammarKind::kChoice;
      s.choices.assign(so.choice().choices().begin(), so.choice().choices().end());
      break;
    case v1::StructuredOutput::kStructuralTag:
      s.kind = GrammarKind::kStructuralTag;
      s.source = so.structural_tag();
      break;
    case v1::StructuredOutput::FORMAT_NOT_SET: return;
  }
  s.field = absl::StrCat("structured.", std::string(GrammarKindName(s.kind)));
  r->structured = std::move(s);
}

}  // namespace

ServeRequest FromProto(const v1::GenerateRequest& q) {
  ServeRequest r;
  r.request_id = q.request_id();
  switch (q.input_case()) {
    case v1::GenerateRequest::kText:
      r.input = ServeRequest::Input::kText;
      r.text = q.text();
      break;
    case v1::GenerateRequest::kChat: ReadChat(q.chat(), &r); break;
    case v1::GenerateRequest::kTokens:
      r.input = ServeRequest::Input::kTokens;
      r.token_ids.assign(q.tokens().ids().begin(), q.tokens().ids().end());
      break;
    case v1::GenerateRequest::INPUT_NOT_SET: break;
  }
  const v1::SamplingParams& s = q.sampling();
  // Left out: the server's defaults (PrepareRequest). proto3 scalars have
  // no presence, so top_k and min_p at 0 read as left out too; their
  // default is off unless a generation config sets one.
  if (s.has_temperature()) r.temperature = s.temperature();
  if (s.has_top_p()) r.top_p = s.top_p();
  if (s.top_k() != 0) r.top_k = s.top_k();
  if (s.min_p() != 0.0f) r.min_p = s.min_p();
  if (s.has_repetition_penalty()) r.repetition_penalty = s.repetition_penalty();
  if (s.n() != 0) r.n = s.n();
  r.sampling.presence_penalty = s.presence_penalty();
  r.sampling.frequency_penalty = s.frequency_penalty();
  // A map has no order: sorted by id, so the same request biases alike.
  std::map<int32_t, float> bias(s.logit_bias().begin(), s.logit_bias().end());
  r.sampling.logit_bias.assign(bias.begin(), bias.end());
  if (s.has_seed()) r.sampling.seed = s.seed();
  const v1::StoppingCriteria& st = q.stopping();
  r.max_tokens = st.max_tokens();
  r.stop.assign(st.stop().begin(), st.stop().end());
  r.stop_token_ids.assign(st.stop_token_ids().begin(), st.stop_token_ids().end());
  r.ignore_eos = st.ignore_eos();
  r.time_limit_ms = st.time_limit_ms();
  if (st.max_reasoning_tokens() != 0) r.max_reasoning_tokens = st.max_reasoning_tokens();
  r.min_tokens = st.min_tokens();
  r.include_stop_str_in_output = st.include_stop_str_in_output();
  const v1::OutputOptions& out = q.output();
  if (out.has_logprobs()) r.logprobs = out.logprobs();  // -1: none, as absent; below: refused
  if (out.has_prompt_logprobs()) r.prompt_logprobs = out.prompt_logprobs();
  r.skip_special_tokens = !out.has_skip_special_tokens() || out.skip_special_tokens();
  if (q.kv().has_policy()) r.kv_policy = q.kv().policy();
  if (q.kv().has_budget()) r.kv_budget = q.kv().budget();
  if (q.kv().has_budget_bytes()) r.kv_budget_bytes = q.kv().budget_bytes();
  if (q.has_cache_salt()) r.cache_salt = q.cache_salt();
  if (q.has_structured()) ReadStructured(q.structured(), &r);
  return r;
}

ServeRequest FromProto(const v1::TokenizeRequest& q) {
  ServeRequest r;
  if (q.input_case() == v1::TokenizeRequest::kText) {
    r.input = ServeRequest::Input::kText;
    r.text = q.text();
  } else if (q.input_case() == v1::TokenizeRequest::kChat) {
    ReadChat(q.chat(), &r);
  }
  return r;
}

void ToProto(const PositionLogprobs& lp, v1::TokenLogprob* out) {
  out->set_token_id(lp.id);
  out->set_logprob(lp.logprob);
  out->set_rank(lp.rank);
  for (const TokenLogprob& t : lp.top) {
    v1::TopLogprob* top = out->add_top();
    top->set_token_id(t.id);
    top->set_logprob(t.logprob);
  }
}

v1::FinishReason ToProto(FinishReason reason) {
  if (reason == FinishReason::kNone) return v1::FINISH_REASON_UNSPECIFIED;
  std::string name = absl::StrCat("FINISH_REASON_", std::string(FinishReasonName(reason)));
  absl::AsciiStrToUpper(&name);
  v1::FinishReason out = v1::FINISH_REASON_ERROR;
  return v1::FinishReason_Parse(name, &out) ? out : v1::FINISH_REASON_ERROR;
}

void FillFinal(const StreamFinal& f, v1::GenerateResponse* out) {
  out->set_finish_reason(ToProto(f.reason));
  if (!f.error.empty()) out->set_error(f.error);
  out->set_matched_stop(f.matched_stop);
  if (f.stop_token_id >= 0) out->set_matched_stop_token_id(f.stop_token_id);
  out->set_seed(f.seed);
  out->mutable_usage()->set_prompt_tokens(f.prompt_tokens);
  out->mutable_usage()->set_completion_tokens(f.completion_tokens);
  out->mutable_usage()->set_reasoning_tokens(f.reasoning_tokens);
  out->mutable_usage()->set_cached_tokens(f.cached_tokens_reported ? f.cached_tokens : 0);
  v1::Timings* t = out->mutable_timings();
  t->set_queue_seconds(f.queue_seconds);
  t->set_time_to_first_token_seconds(f.ttft_seconds);
  t->set_total_seconds(f.total_seconds);
  v1::KvStats* kv = out->mutable_kv();
  kv->set_policy(std::string(KvPolicyName(f.kv.policy)));
  kv->set_budget(f.kv.budget);
  kv->set_peak_cached_tokens(f.kv.peak_cached_tokens);
  kv->set_evictions(f.kv.evictions);
  kv->set_evicted_tokens(f.kv.evicted_tokens);
  kv->set_reserved_tokens(f.kv.reserved_tokens);
  kv->set_preemptions(f.kv.preemptions);
  kv->set_bytes_per_slot(f.kv.bytes_per_slot);
  kv->set_state_bytes(f.kv.state_bytes);
  if (f.kv.options.compresses()) {
    const KvPolicyOptions& o = f.kv.options;
    v1::KvResolvedOptions* r = kv->mutable_options();
    r->set_budget(o.budget);
    r->set_interval(o.interval);
    r->set_eviction_phase(o.eviction_phase);
    r->set_sinks(o.sinks);
    r->set_window(o.window);
    r->set_protected_window(f.kv.protected_window);
    r->set_keep_prompt(o.keep_prompt);
    r->set_recent_queries(o.recent_queries);
    r->set_beacons(o.beacons);
    r->set_fps_bound(o.fps_bound);
    r->set_beacon_filter(o.beacon_filter == BeaconFilter::kGlobal ? "global" : "all");
    r->set_beacon_prompt_queries(o.beacon_prompt_queries);
    r->set_beacon_bf16_state(o.beacon_bf16_state);
    r->set_beacon_group_queries(o.beacon_group_queries);
    r->set_global_threshold(o.global_threshold);
    r->set_pool_kernel(o.pool_kernel);
    r->set_lambda(o.lambda);
    r->set_seed(o.seed);
  }
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  const std::string message(s.message());
  // absl and gRPC share the canonical code numbering.
  const auto code = static_cast<grpc::StatusCode>(s.code());
  google::rpc::Status rich;
  rich.set_code(static_cast<int32_t>(s.code()));
  rich.set_message(message);
  if (s.code() == absl::StatusCode::kInvalidArgument) {
    if (const std::string field = FieldOf(message); !field.empty()) {
      google::rpc::BadRequest bad;
      google::rpc::BadRequest::FieldViolation* v = bad.add_field_violations();
      v->set_field(field);
      v->set_description(message.substr(field.size() + 2));
      rich.add_details()->PackFrom(bad);
    }
  } else if (s.code() == absl::StatusCode::kResourceExhausted || s.code() == absl::StatusCode::kUnavailable) {
    // Queue full or draining: worth retrying soon (elsewhere, when draining).
    google::rpc::RetryInfo retry;
    retry.mutable_retry_delay()->set_seconds(kRetryDelaySeconds);
    rich.add_details()->PackFrom(retry);
  }
  if (rich.details_size() == 0) return grpc::Status(code, message);
  return grpc::Status(code, message, rich.SerializeAsString());
}

SchedClock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
  const auto sys_now = std::chrono::system_clock::now();
  // gRPC reports "no deadline" as a time point decades away.
  if (deadline - sys_now > std::chrono::hours(24 * 365)) return SchedClock::time_point::max();
  return SchedClock::now() + std::chrono::duration_cast<SchedClock::duration>(deadline - sys_now);
}

}  // namespace beacon
