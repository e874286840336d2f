#include "planner/slo.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace beacon::planner {

absl::StatusOr<SloSpec> ParseSlo(std::string_view spec, double attainment) {
  SloSpec slo;
  absl::StatusOr<workload::Slo> bounds =
      workload::ParseSlo(absl::string_view(spec.data(), spec.size()));  // Debian's absl::string_view is its own type
  if (!bounds.ok()) return bounds.status();
  if (!(attainment > 0 && attainment <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--slo-attainment: must be in (0, 1], got ", attainment));
  }
  slo.bounds = *std::move(bounds);
  slo.attainment = attainment;
  return slo;
}

std::string SloSpec::Describe() const {
  if (!enabled()) return "none";
  return absl::StrFormat("%s for %g%% of requests", bounds.ToString(), attainment * 100);
}

SloVerdict CheckSlo(const RunResult& r, const SloSpec& slo, int32_t warmup) {
  SloVerdict v;
  warmup = std::clamp<int32_t>(warmup, 0, static_cast<int32_t>(r.requests.size()));
  const int64_t total = static_cast<int64_t>(r.requests.size()) - warmup + r.rejected;
  int64_t good = 0, ttft_miss = 0, tpot_miss = 0, e2e_miss = 0;
  for (size_t i = warmup; i < r.requests.size(); ++i) {
    const RequestSample& q = r.requests[i];
    if (!q.ok) continue;
    const workload::Slo& b = slo.bounds;
    const bool t1 = !b.ttft_ms || q.ttft_s * 1e3 <= *b.ttft_ms;
    const bool t2 = !b.tpot_ms || q.output_tokens < 2 || q.tpot_s * 1e3 <= *b.tpot_ms;
    const bool t3 = !b.e2e_ms || q.e2e_s * 1e3 <= *b.e2e_ms;
    ttft_miss += !t1;
    tpot_miss += !t2;
    e2e_miss += !t3;
    good += t1 && t2 && t3;
  }
  v.attainment = total > 0 ? static_cast<double>(good) / total : 0;
  if (r.rejected > 0) {
    v.why = absl::StrCat(r.rejected, " requests rejected (queue full)");
  } else if (v.attainment < slo.attainment) {
    v.why = absl::StrFormat("%.1f%% attained (misses: ttft %d, tpot %d, e2e %d, failed %d)", v.attainment * 100,
                            ttft_miss, tpot_miss, e2e_miss, r.failed);
  }
  v.met = total > 0 && v.why.empty();
  return v;
}

double SteadyStateRate(const RunResult& r) {
  double first_done = std::numeric_limits<double>::max(), last_arrival = 0;
  for (const RequestSample& q : r.requests) {
    if (q.ok) first_done = std::min(first_done, q.finish_s);
    last_arrival = std::max(last_arrival, q.arrival_s);
  }
  int64_t in_window = 0;
  for (const RequestSample& q : r.requests) in_window += q.ok && q.finish_s > first_done && q.finish_s <= last_arrival;
  if (last_arrival > first_done && in_window >= 8) return in_window / (last_arrival - first_done);
  return r.requests_per_s;
}

absl::StatusOr<CapacityResult> FindMaxRate(const RunInputs& base, const SloSpec& slo, const SearchOptions& opt,
                                           const std::function<void(const std::string&)>& progress) {
  if (!slo.enabled()) return absl::InvalidArgumentError("--slo: no bound given");
  CapacityResult out;
  RunInputs in = base;
  in.workload.num_requests =
      opt.requests > 0 ? opt.requests : std::max(in.workload.num_requests, 4 * in.sched.max_running);
  const int32_t warmup = std::min(in.sched.max_running, in.workload.num_requests / 4);

  // Saturation: every running slot busy, long enough for a steady state.
  RunInputs sat_in = in;
  sat_in.workload.arrival = ArrivalKind::kClosedLoop;
  sat_in.workload.concurrency = in.sched.max_running;
  sat_in.workload.num_requests = std::max(in.workload.num_requests, 3 * in.sched.max_running);
  absl::StatusOr<RunResult> sat = RunPlan(sat_in, nullptr);
  if (!sat.ok()) return sat.status();
  ++out.probes;
  out.saturation_rate = SteadyStateRate(*sat);
  if (progress)
    progress(
        absl::StrFormat("saturation %.4g req/s (closed loop x%d)", out.saturation_rate, sat_in.workload.concurrency));
  if (!(out.saturation_rate > 0)) return out;

  in.workload.arrival = ArrivalKind::kPoisson;
  auto probe = [&](double rate) -> absl::StatusOr<SloVerdict> {
    in.workload.rate = rate;
    absl::StatusOr<RunResult> r = RunPlan(in, nullptr);
    if (!r.ok()) return r.status();
    ++out.probes;
    SloVerdict v = CheckSlo(*r, slo, warmup);
    if (progress) {
      progress(absl::StrFormat("rate %.4g req/s: %s", rate,
                               v.met ? absl::StrFormat("meets the SLO (%.1f%% attained)", v.attainment * 100) : v.why));
    }
    return v;
  };
  double hi = kUtilisationCeiling * out.saturation_rate, lo = 0;
  absl::StatusOr<SloVerdict> top = probe(hi);
  if (!top.ok()) return top.status();
  if (top->met) {
    out.max_rate = hi;
    out.at_max = *top;
    out.limit = absl::StrFormat("utilisation (%.0f%% of saturation)", kUtilisationCeiling * 100);
    return out;
  }
  out.limit = top->why;
  // Find a rate that meets it, halving down to 1/256 of saturation.
  SloVerdict ok_verdict;
  bool found = false;
  for (double rate = hi / 2; rate >= out.saturation_rate / 256; rate /= 2) {
    absl::StatusOr<SloVerdict> v = probe(rate);
    if (!v.ok()) return v.status();
    if (v->met) {
      found = true;
      ok_verdict = *v;
      lo = rate;
      break;
    }
    hi = rate;
    out.limit = v->why;
  }
  if (!found) return out;  // max_rate 0: out of reach
  for (int i = 0; i < opt.iterations; ++i) {
    const double mid = (lo + hi) / 2;
    absl::StatusOr<SloVerdict> v = probe(mid);
    if (!v.ok()) return v.status();
    if (v->met) {
      lo = mid;
      ok_verdict = *v;
    } else {
      hi = mid;
      out.limit = v->why;
    }
  }
  out.max_rate = lo;
  out.at_max = ok_verdict;
  return out;
}

int64_t ReplicasFor(double rate, double max_rate) {
  if (!(max_rate > 0)) return -1;
  return static_cast<int64_t>(std::ceil(rate / max_rate - 1e-9));
}

}  // namespace beacon::planner
