#include "server/grpc/model_info.h"

#include <algorithm>

#include "kv/policy/kv_policy.h"
#include "kv/policy/policy_bytes.h"
#include "kv/serving/kv_policy_limits.h"

namespace beacon {

v1::ModelInfo MakeModelInfo(const std::string& model, const ModelConfig& c, const Tokenizer& tok,
                            const ServeLimits& limits, const SchedulerConfig& sched, int block_size,
                            int64_t pool_tokens) {
  v1::ModelInfo m;
  m.set_model(model);
  m.set_architecture(std::string(ModelFamilyName(c.family)));
  m.set_context_length(c.context_length);
  m.set_vocab_size(c.vocab_size);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.IsEndOfGeneration(id)) m.add_eos_token_ids(id);
  }
  m.set_has_chat_template(true);
  m.set_kv_block_size(block_size);
  m.set_kv_pool_tokens(static_cast<int32_t>(pool_tokens));
  m.set_max_tokens_default(limits.default_max_tokens);
  m.set_max_tokens_limit(limits.max_tokens_limit > 0 ? limits.max_tokens_limit : c.context_length);
  for (KvPolicyKind policy : KvPolicyKinds()) {
    const std::string name(KvPolicyName(policy));
    v1::KvPolicyInfo* p = m.add_kv_policies();
    p->set_name(name);
    const auto& allowed = limits.kv_limits.allowed_policies;
    p->set_allowed(policy == limits.kv_default.policy || allowed.empty() ||
                   std::find(allowed.begin(), allowed.end(), policy) != allowed.end());
    p->set_is_default(policy == limits.kv_default.policy);
    absl::StatusOr<KvPolicyOptions> o =
        ResolveRequestKvOptions(limits.kv_default, KvPolicyLimits(), name, std::nullopt);
    if (o.ok() && o->compresses()) {
      p->set_budget(o->budget);
      p->set_interval(o->interval);
      p->set_sinks(o->sinks);
      p->set_window(o->window);
      p->set_keep_prompt(o->keep_prompt);
      p->set_recent_queries(o->recent_queries);
      p->set_beacons(policy == KvPolicyKind::kBeacon ? o->beacons : 0);
      p->set_fps_bound(policy == KvPolicyKind::kBeacon ? o->fps_bound : 0);
    }
  }
  m.set_default_kv_policy(std::string(limits.kv_default.policy_name()));
  m.set_default_kv_budget(limits.kv_default.compresses() ? limits.kv_default.budget : 0);
  m.set_kv_budget_min(limits.kv_limits.min_budget);
  m.set_kv_budget_max(limits.kv_limits.max_budget);
  m.set_kv_interval(limits.kv_default.interval);
  m.set_admission(std::string(AdmissionModeName(sched.admission)));
  m.set_reasoning_parser(std::string(ReasoningParserName(limits.reasoning.parser)));
  v1::DefaultSampling* d = m.mutable_default_sampling();
  d->set_temperature(limits.defaults.temperature);
  d->set_top_p(limits.defaults.top_p);
  d->set_top_k(limits.defaults.top_k);
  d->set_min_p(limits.defaults.min_p);
  d->set_repetition_penalty(limits.defaults.repetition_penalty);
  d->set_source(limits.defaults.source);
  m.set_logprobs_mode(std::string(LogprobsModeName(limits.logprobs_mode)));
  m.set_max_logprobs(limits.max_logprobs);
  if (limits.kv_row_bytes > 0) m.set_kv_bytes_per_slot(KvBytesPerSlot(limits.kv_model, limits.kv_row_bytes));
  return m;
}

}  // namespace beacon
