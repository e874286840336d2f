#include "eval/synthetic_trace.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"

namespace beacon::eval {
namespace {

// A random unit vector supported on the RoPE pairs [pair_begin, pair_end)
// of a non-interleaved head: pair i is dimensions (i, i + d/2).
std::vector<float> Direction(std::mt19937_64& rng, int d, int pair_begin, int pair_end) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(d, 0.0f);
  double norm2 = 0.0;
  for (int i = pair_begin; i < pair_end; ++i) {
    for (int dim : {i, i + d / 2}) {
      v[dim] = normal(rng);
      norm2 += static_cast<double>(v[dim]) * v[dim];
    }
  }
  const float inv = static_cast<float>(1.0 / std::sqrt(norm2));
  for (float& x : v) x *= inv;
  return v;
}

// out = scale * dir + noise (or noise alone for an empty dir).
void Emit(std::mt19937_64& rng, float noise, const std::vector<float>* dir, float scale, int d, float* out) {
  std::normal_distribution<float> normal(0.0f, noise);
  for (int i = 0; i < d; ++i) out[i] = (dir != nullptr ? scale * (*dir)[i] : 0.0f) + normal(rng);
}

}  // namespace

absl::Status SyntheticTraceOptions::Validate() const {
  auto bad = [](const char* field, auto v, const char* rule) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", v, " ", rule));
  };
  if (n_kv_heads < 1) return bad("n_kv_heads", n_kv_heads, "must be >= 1");
  if (n_heads < n_kv_heads || n_heads % n_kv_heads != 0) {
    return bad("n_heads", n_heads, "must be a multiple of n_kv_heads");
  }
  if (head_dim < 16 || head_dim % 2 != 0) return bad("head_dim", head_dim, "must be even and >= 16");
  if (!(rope_theta > 1.0f)) return bad("rope_theta", rope_theta, "must be > 1");
  if (prompt_len < 1) return bad("prompt_len", prompt_len, "must be >= 1");
  if (plan_steps < 1) return bad("plan_steps", plan_steps, "must be >= 1");
  if (plan_len < plan_steps || plan_len % plan_steps != 0) {
    return bad("plan_len", plan_len, "must be a multiple of plan_steps");
  }
  if (middle_len < 1) return bad("middle_len", middle_len, "must be >= 1");
  if (segment_len < 1) return bad("segment_len", segment_len, "must be >= 1");
  if (revisit_every < 2) return bad("revisit_every", revisit_every, "must be >= 2");
  if (!(plan_logit > 0.0f) || !(work_logit > 0.0f)) return bad("plan_logit/work_logit", plan_logit, "must be > 0");
  if (!(noise >= 0.0f)) return bad("noise", noise, "must be >= 0");
  return absl::OkStatus();
}

PolicyModelInfo SyntheticTrace::model_info() const {
  PolicyModelInfo m;
  m.n_layers = 1;
  m.n_heads = options.n_heads;
  m.n_kv_heads = options.n_kv_heads;
  m.head_dim = options.head_dim;
  m.rope_theta = options.rope_theta;
  m.rope_interleaved = false;
  return m;
}

SyntheticTrace GenerateSyntheticTrace(const SyntheticTraceOptions& o) {
  SyntheticTrace t;
  t.options = o;
  const int n = o.n_tokens(), d = o.head_dim, half = d / 2, group = o.n_heads / o.n_kv_heads;
  std::mt19937_64 rng(o.seed);
  // Plan directions in the slowest quarter of the pairs, working directions
  // in the three eighths below (see the header for why).
  const int plan_pairs = half - half / 4, work_pairs = half - half / 4 - (3 * half) / 8;
  std::vector<std::vector<std::vector<float>>> plan_dir(o.n_kv_heads);
  for (int h = 0; h < o.n_kv_heads; ++h) {
    for (int j = 0; j < o.plan_steps; ++j) plan_dir[h].push_back(Direction(rng, d, plan_pairs, half));
  }
  // Magnitudes with |q| |k| / sqrt(d) equal to the wanted logit.
  const float plan_mag = std::sqrt(o.plan_logit * std::sqrt(static_cast<float>(d)));
  const float work_mag = std::sqrt(o.work_logit * std::sqrt(static_cast<float>(d)));

  t.kind.assign(n, TokenKind::kWork);
  t.topic.assign(n, -1);
  t.q.assign(static_cast<size_t>(n) * o.n_heads * d, 0.0f);
  t.k.assign(static_cast<size_t>(n) * o.n_kv_heads * d, 0.0f);
  std::uniform_int_distribution<int> pick_topic(0, o.plan_steps - 1);
  std::uniform_int_distribution<int> gap(o.revisit_every / 2, o.revisit_every + o.revisit_every / 2);
  int next_revisit = t.plan_end() + gap(rng);
  std::vector<std::vector<float>> work_dir(o.n_kv_heads);
  int segment = -1;

  for (int pos = 0; pos < n; ++pos) {
    // The direction each KV head's key and query follow at this position.
    std::vector<const std::vector<float>*> kdir(o.n_kv_heads, nullptr), qdir(o.n_kv_heads, nullptr);
    float kmag = 0.0f, qmag = 0.0f;
    if (pos < t.plan_begin()) {
      t.kind[pos] = TokenKind::kPrompt;
    } else if (pos < t.plan_end()) {
      const int j = (pos - t.plan_begin()) / (o.plan_len / o.plan_steps);
      t.kind[pos] = TokenKind::kPlan;
      t.topic[pos] = j;
      for (int h = 0; h < o.n_kv_heads; ++h) kdir[h] = qdir[h] = &plan_dir[h][j];
      kmag = qmag = plan_mag;
    } else {
      const int s = (pos - t.plan_end()) / o.segment_len;
      if (s != segment) {
        segment = s;
        for (int h = 0; h < o.n_kv_heads; ++h) work_dir[h] = Direction(rng, d, work_pairs, plan_pairs);
      }
      for (int h = 0; h < o.n_kv_heads; ++h) kdir[h] = qdir[h] = &work_dir[h];
      kmag = qmag = work_mag;
      if (pos == next_revisit) {
        const int j = pick_topic(rng);
        t.kind[pos] = TokenKind::kRevisit;
        t.topic[pos] = j;
        for (int h = 0; h < o.n_kv_heads; ++h) qdir[h] = &plan_dir[h][j];
        qmag = plan_mag;
        next_revisit = pos + gap(rng);
      }
    }
    for (int h = 0; h < o.n_kv_heads; ++h) {
      Emit(rng, o.noise, kdir[h], kmag, d, t.k.data() + (static_cast<size_t>(pos) * o.n_kv_heads + h) * d);
    }
    for (int qh = 0; qh < o.n_heads; ++qh) {
      Emit(rng, o.noise, qdir[qh / group], qmag, d, t.q.data() + (static_cast<size_t>(pos) * o.n_heads + qh) * d);
    }
  }
  return t;
}

TraceRope::TraceRope(const SyntheticTraceOptions& options) : head_dim_(options.head_dim) {
  inv_freq_.resize(head_dim_ / 2);
  RopeInvFreq(options.rope_theta, head_dim_, inv_freq_.data());
}

void TraceRope::Apply(const float* x, int32_t position, float* out) const {
  if (out != x) std::copy(x, x + head_dim_, out);
  Rope(out, head_dim_, position, inv_freq_.data(), /*interleaved=*/false);
}

void AttentionProbs(const float* q, const float* keys, size_t stride, int32_t n_keys, int head_dim, float* probs) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int32_t p = 0; p < n_keys; ++p) probs[p] = Dot(q, keys + p * stride, head_dim) * scale;
  SoftmaxInPlace(probs, n_keys);
}

}  // namespace beacon::eval
