#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

// Closed-interval range check that also rejects NaN.
bool InRange(float v, float lo, float hi) { return v >= lo && v <= hi; }

absl::Status RangeError(const char* field, float value, const char* range) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be in ", range, ", got ", value));
}

// Size of the first nucleus prefix sorted for top-p; the sorted prefix grows
// fourfold while the cumulative probability has not reached top_p. Peaked
// distributions (the common case) finish within the first chunk at O(V) cost;
// a flat one costs O(V log_4(P)) selection plus O(P log P) to sort the P
// tokens of its nucleus, never more than a constant times a full sort.
constexpr size_t kFirstTopPChunk = 64;

// 53 random bits -> a double uniform in [0, 1). Written out rather than using
// std::uniform_real_distribution so that draws are identical across standard
// libraries (the distribution's algorithm is implementation-defined).
double ToUnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

uint64_t RandomSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

absl::Status SamplingParams::Validate() const {
  if (!InRange(temperature, 0.0f, 100.0f)) {
    return RangeError("temperature", temperature, "[0, 100]");
  }
  if (top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k: must be >= 0 (0 = off), got ", top_k));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return RangeError("top_p", top_p, "(0, 1]");
  }
  if (!InRange(min_p, 0.0f, 1.0f)) {
    return RangeError("min_p", min_p, "[0, 1]");
  }
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f)) {
    return RangeError("repetition_penalty", repetition_penalty, "(0, 10]");
  }
  if (!InRange(presence_penalty, -2.0f, 2.0f)) {
    return RangeError("presence_penalty", presence_penalty, "[-2, 2]");
  }
  if (!InRange(frequency_penalty, -2.0f, 2.0f)) {
    return RangeError("frequency_penalty", frequency_penalty, "[-2, 2]");
  }
  for (const auto& [id, bias] : logit_bias) {
    if (!InRange(bias, -100.0f, 100.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: the bias of token ", id, " must be in [-100, 100], got ", bias));
    }
  }
  return absl::OkStatus();
}

bool Sampler::modifies_logits() const {
  return params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
         !params_.logit_bias.empty();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed.has_value() ? *params.seed : RandomSeed()) {}

// REQUIRES: params().Validate().ok() (out-of-range values are not rejected
// here; they degrade to the nearest sensible behaviour, e.g. temperature <= 0
// is greedy). Returns -1 only for empty logits.
//
// Pipeline (vLLM / llama.cpp order): penalties on a copy of the logits, then
// logit_bias, the bans and the grammar's mask (the processed logits); greedy
// if temperature == 0; otherwise top-k on logits, softmax at the temperature,
// top-p over the sorted candidates, min-p relative to the best candidate, and
// a draw proportional to the surviving (implicitly renormalised) weights.
// NaN logits are treated as -inf so that they are never chosen.
int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> prompt,
                        std::span<const int32_t> generated, std::span<const int32_t> banned,
                        std::span<const uint32_t> allowed) {
  // Advanced exactly once per call, greedy included, so a seeded request's
  // stream of draws does not depend on which steps happened to be greedy.
  const double unit = ToUnitInterval(rng_());
  const size_t n = logits.size();
  if (n == 0) return -1;

  std::vector<float>& x = scratch_;
  x.resize(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
  }

  // ---- Penalties. Out-of-range ids in the history are ignored. ----
  const float rep = params_.repetition_penalty;
  const float presence = params_.presence_penalty;
  const float frequency = params_.frequency_penalty;
  const bool use_rep = rep != 1.0f;
  if (use_rep || presence != 0.0f || frequency != 0.0f) {
    if (seen_.size() != n) seen_.assign(n, 0);
    touched_.clear();
    auto mark = [&](int32_t t) -> int32_t* {
      if (t < 0 || static_cast<size_t>(t) >= n) return nullptr;
      if (seen_[t] == 0) {
        seen_[t] = 1;
        touched_.push_back(t);
      }
      return &seen_[t];
    };
    if (use_rep) {
      for (int32_t t : prompt) mark(t);
    }
    for (int32_t t : generated) {
      if (int32_t* s = mark(t)) ++*s;
    }
    for (int32_t t : touched_) {
      const int32_t count = seen_[t] - 1;  // occurrences in generated
      seen_[t] = 0;
      float v = x[t];
      if (use_rep) v = v > 0.0f ? v / rep : v * rep;
      if (count > 0) v -= frequency * static_cast<float>(count) + presence;
      x[t] = v;
    }
  }
  // ---- logit_bias, then bans (last, so that no bias revives a banned token). ----
  for (const auto& [t, bias] : params_.logit_bias) {
    if (t >= 0 && static_cast<size_t>(t) < n) x[t] += bias;
  }
  for (int32_t t : banned) {
    if (t >= 0 && static_cast<size_t>(t) < n) x[t] = -std::numeric_limits<float>::infinity();
  }
  if (!allowed.empty()) {
    // A grammar's mask, word by word: a token past the mask is not allowed.
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (size_t w = 0; w * 32 < n; ++w) {
      const uint32_t bits = w < allowed.size() ? allowed[w] : 0u;
      if (bits == 0xffffffffu) continue;
      const size_t end = std::min(n, w * 32 + 32);
      for (size_t t = w * 32; t < end; ++t) {
        if (((bits >> (t - w * 32)) & 1u) == 0) x[t] = kNegInf;
      }
    }
  }
  if (keep_processed_) processed_.assign(x.begin(), x.end());

  // ---- Greedy: argmax, ties to the lowest id. ----
  if (!(params_.temperature > 0.0f)) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i) {
      if (x[i] > x[best]) best = i;
    }
    return static_cast<int32_t>(best);
  }

  // ---- Candidates: top-k by logit (ties: lower id first), else all. ----
  std::vector<int32_t>& idx = idx_;
  idx.resize(n);
  std::iota(idx.begin(), idx.end(), 0);
  size_t count = n;
  auto by_value_desc = [&x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    count = static_cast<size_t>(params_.top_k);
    std::nth_element(idx.begin(), idx.begin() + count - 1, idx.end(), by_value_desc);
  }

  // ---- Softmax weights w = exp((x - max) / T), written over x. The best
  // candidate gets exactly 1, so p_max corresponds to weight 1. Computing
  // (x - max) before dividing keeps tiny temperatures from overflowing, and
  // the x == max test keeps +inf / all -inf logits from producing NaN. ----
  float max_logit = x[idx[0]];
  for (size_t i = 1; i < count; ++i) max_logit = std::max(max_logit, x[idx[i]]);
  const float inv_t = 1.0f / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const int32_t t = idx[i];
    const float w = x[t] == max_logit ? 1.0f : std::exp((x[t] - max_logit) * inv_t);
    x[t] = w;
    total += w;
  }

  // ---- Top-p: the shortest prefix in descending order whose mass reaches
  // top_p (at least one token). Only as much of the order as needed is
  // sorted: each round selects the next chunk from the unsorted rest (which
  // holds only weights <= those already sorted) and sorts it. ----
  size_t keep = count;
  bool sorted_prefix = false;
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    size_t done = 0;
    keep = 0;
    while (keep == 0 && done < count) {
      const size_t next = std::min(count, std::max(kFirstTopPChunk, 4 * done));
      // Select the next chunk in O(rest), then order only the chunk.
      std::nth_element(idx.begin() + done, idx.begin() + (next - 1), idx.begin() + count, by_value_desc);
      std::sort(idx.begin() + done, idx.begin() + next, by_value_desc);
      for (size_t i = done; i < next; ++i) {
        cum += x[idx[i]];
        if (cum >= target) {
          keep = i + 1;
          break;
        }
      }
      done = next;
    }
    if (keep == 0) keep = count;  // rounding left the mass just short of top_p
    sorted_prefix = true;
  }

  // ---- Min-p: keep w >= min_p * w_max, with w_max == 1. The best token
  // always survives since min_p <= 1. ----
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p;
    if (sorted_prefix) {
      while (keep > 1 && x[idx[keep - 1]] < threshold) --keep;
    } else {
      size_t out = 0;
      for (size_t i = 0; i < keep; ++i) {
        if (x[idx[i]] >= threshold) idx[out++] = idx[i];
      }
      keep = out;
    }
  }

  // ---- Draw proportionally to the kept weights. Zero weights are never
  // chosen: `u < acc` cannot become true on a step that adds nothing. ----
  if (keep != count || sorted_prefix) {
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += x[idx[i]];
  }
  const double u = unit * total;
  double acc = 0.0;
  int32_t last_positive = idx[0];
  for (size_t i = 0; i < keep; ++i) {
    const float w = x[idx[i]];
    if (w <= 0.0f) continue;
    acc += w;
    last_positive = idx[i];
    if (u < acc) return idx[i];
  }
  return last_positive;  // u fell at the very top through rounding
}

}  // namespace beacon
