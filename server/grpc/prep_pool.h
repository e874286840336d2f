// Where the gRPC service renders chat templates, tokenizes and detokenizes
// (issue 46): off gRPC's callback threads, which must not block (a flood of
// large requests there stalls the whole listener, its health self-check
// included), on a few threads of their own behind a bounded queue. A call
// that finds the queue full is answered RESOURCE_EXHAUSTED at once, so the
// work a client can make the server hold is bounded by `max_queued`.
//
// Thread-safe. Tasks run in submission order, `threads` at a time.
#ifndef BEACON_SERVER_GRPC_PREP_POOL_H_
#define BEACON_SERVER_GRPC_PREP_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "util/mutex.h"

namespace beacon {

class PrepPool {
 public:
  // REQUIRES: threads >= 1, max_queued >= 0.
  PrepPool(int threads, size_t max_queued);
  // Runs what is queued (each task ends a call, which gRPC's shutdown waits
  // for), then joins.
  ~PrepPool();
  PrepPool(const PrepPool&) = delete;
  PrepPool& operator=(const PrepPool&) = delete;

  // Queues `task`; false (and `task` dropped) when `max_queued` tasks wait
  // already or the pool is stopping.
  bool TrySubmit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t max_queued() const { return max_queued_; }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_queued_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_GRPC_PREP_POOL_H_
