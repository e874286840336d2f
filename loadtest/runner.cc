#include "loadtest/runner.h"

#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loadtest/arrival.h"

namespace beacon::loadtest {
namespace {

// What gRPC threads hand to the control thread. Shared so a late callback
// can never touch a finished run's stack.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RequestResult> done;  // GUARDED_BY(mu)
  std::atomic<int64_t> tokens{0};
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Progress {
 public:
  Progress(bool enabled, std::string label, Clock::time_point t0)
      : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0), label_(std::move(label)), last_(t0) {}

  void Maybe(Clock::time_point now, Clock::time_point t0, int64_t sent, int64_t done, int64_t errors, int64_t tokens,
             bool force = false) {
    if (!enabled_) return;
    const double every = tty_ ? 1.0 : 5.0;
    if (!force && Seconds(now - last_) < every) return;
    last_ = now;
    const double t = Seconds(now - t0);
    const std::string line =
        absl::StrFormat("%s%6.1fs  sent %lld  done %lld  in flight %lld  errors %lld  output %lld tok (%.1f tok/s)",
                        label_.empty() ? "" : absl::StrCat("[", label_, "] "), t, sent, done, sent - done, errors,
                        tokens, t > 0 ? tokens / t : 0.0);
    if (tty_) {
      std::fprintf(stderr, "\r%-100s", line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
    printed_ = true;
  }

  void End() {
    if (enabled_ && tty_ && printed_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_, tty_;
  std::string label_;
  Clock::time_point last_;
  bool printed_ = false;
};

}  // namespace

absl::Status ValidateLoad(const LoadOptions& o) {
  if ((o.rate > 0) == (o.concurrency > 0)) {
    return absl::InvalidArgumentError("give exactly one of --rate (open loop) and --concurrency (closed loop)");
  }
  if (o.rate > 0) {
    if (absl::Status s = ValidateArrival(o.rate, o.burstiness); !s.ok()) return s;
  }
  if ((o.requests > 0) == (o.duration_s > 0)) {
    return absl::InvalidArgumentError("give exactly one of --requests and --duration-s");
  }
  if (o.requests < 0) return absl::InvalidArgumentError("--requests must be >= 1");
  if (o.warmup < 0) return absl::InvalidArgumentError("--warmup must be >= 0");
  if (std::isnan(o.duration_s) || o.duration_s < 0 || std::isinf(o.duration_s)) {
    return absl::InvalidArgumentError("--duration-s must be a positive number of seconds");
  }
  return absl::OkStatus();
}

RunOutput RunLoad(StreamClient* client, Workload* workload, const LoadOptions& opt) {
  RunOutput out;
  auto inbox = std::make_shared<Inbox>();
  const bool open_loop = opt.rate > 0;
  const Clock::time_point t0 = Clock::now();
  ArrivalProcess arrivals(open_loop ? opt.rate : 1.0, opt.burstiness, opt.seed ^ 0x9E3779B97F4A7C15ULL);
  Progress progress(opt.progress, opt.label, t0);

  int64_t issued = 0, finished = 0, errors = 0;
  bool measuring = false, stopping = false;
  Clock::time_point measure_start{};
  Clock::time_point next_arrival = t0;

  // Whether a request intended to start at `at` should still be issued.
  auto more = [&](Clock::time_point at) {
    if (stopping) return false;
    if (issued < opt.warmup) return true;
    if (opt.requests > 0) return issued < opt.warmup + opt.requests;
    return !measuring || Seconds(at - measure_start) < opt.duration_s;
  };
  auto issue = [&](Clock::time_point intended) {
    const bool warmup = issued < opt.warmup;
    if (!warmup && !measuring) {
      measuring = true;
      measure_start = intended;
    }
    RequestSpec spec = workload->Next();
    client->Start(
        spec, warmup, intended, t0,
        [inbox](RequestResult r) {
          std::lock_guard<std::mutex> lock(inbox->mu);
          inbox->done.push_back(std::move(r));
          inbox->cv.notify_one();
        },
        [inbox](int n) { inbox->tokens.fetch_add(n, std::memory_order_relaxed); });
    ++issued;
  };

  if (!open_loop) {
    for (int32_t i = 0; i < opt.concurrency && more(Clock::now()); ++i) issue(Clock::now());
  }
  while (true) {
    std::deque<RequestResult> batch;
    {
      std::unique_lock<std::mutex> lock(inbox->mu);
      Clock::time_point wake = Clock::now() + std::chrono::milliseconds(100);
      if (open_loop && more(next_arrival) && next_arrival < wake) wake = next_arrival;
      inbox->cv.wait_until(lock, wake, [&] { return !inbox->done.empty(); });
      batch.swap(inbox->done);
    }
    const Clock::time_point now = Clock::now();
    for (RequestResult& r : batch) {
      ++finished;
      if (!r.Ok()) ++errors;
      out.results.push_back(std::move(r));
      if (!open_loop && more(now)) issue(now);
    }
    if (open_loop) {
      while (more(next_arrival) && next_arrival <= Clock::now()) {
        issue(next_arrival);
        next_arrival += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals.NextGap()));
      }
    }
    if (!stopping && opt.stop != nullptr && opt.stop->load()) {
      stopping = true;
      out.interrupted = true;
      client->CancelAll();
    }
    progress.Maybe(Clock::now(), t0, issued, finished, errors, inbox->tokens.load());
    const bool issuing_done = open_loop ? !more(next_arrival) : !more(Clock::now());
    if (issuing_done && finished == issued) break;
  }
  progress.Maybe(Clock::now(), t0, issued, finished, errors, inbox->tokens.load(), /*force=*/true);
  progress.End();
  out.wall_s = Seconds(Clock::now() - t0);
  return out;
}

}  // namespace beacon::loadtest
