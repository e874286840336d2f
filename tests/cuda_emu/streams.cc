// Streams, events, stream capture and graphs, and the stream-order checker.
//
// Contract:
//  - Every operation executes at issue, in issue order, on the calling
//    thread, except on a capturing stream, where launches, async copies and
//    memsets, event records and GEMMs are recorded (by value, arguments
//    included) and run again, in order, by each cudaGraphLaunch of an
//    instantiated graph. So the emulator cannot show a race between streams
//    by producing a wrong result; the order checker below reports instead.
//  - Capture rules as in CUDA: while a stream captures in global or
//    thread-local mode, synchronous calls that the runtime forbids
//    (cudaMalloc, cudaFree, cudaMemcpy, cudaMemset, device or legacy-stream
//    synchronisation, ...) fail and invalidate the capture, and so does work
//    issued to the legacy default stream; cudaStreamEndCapture of an
//    invalidated capture fails. These are warnings: the backend may handle
//    the failure (by running without graphs).
//  - Stream-order checker. Legacy default stream work that may still run
//    after the call returns (cudaMemset of device memory, D2D and pageable
//    H2D cudaMemcpy, kernels on stream 0) is pending until the device or the
//    legacy stream is synchronised, a D2H cudaMemcpy returns, or cudaFree.
//    Work issued to a non-blocking stream meanwhile is not ordered after it:
//    an error. Conversely, work on a non-blocking stream is pending until
//    that stream or the device is synchronised; a legacy-stream copy or
//    memset touching memory allocated before that work is an error. Events
//    (cudaStreamWaitEvent) are not credited as ordering: the backend does not
//    use them; add that here before it does.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "emu_internal.h"

namespace emu::internal {
struct Graph {
  std::vector<std::function<void()>> ops;
};
}  // namespace emu::internal

struct CUstream_st {
  unsigned flags = 0;
  bool capturing = false;
  bool invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::unique_ptr<emu::internal::Graph> capture;
};
struct CUevent_st {
  uint64_t recorded = 0;  // sequence of the last record, 0 when never recorded
};
struct CUgraph_st {
  emu::internal::Graph graph;
};
struct CUgraphExec_st {
  emu::internal::Graph graph;
};

namespace emu::internal {
namespace {

std::set<cudaStream_t> g_streams;
std::set<cudaEvent_t> g_events;
std::set<cudaGraph_t> g_graphs;
std::set<cudaGraphExec_t> g_execs;

// The stream-order checker's state (see the contract above).
std::string g_legacy_pending;  // what may still run on the legacy stream; empty: nothing
struct Pending {
  std::string what;
  uint64_t sequence;  // of the latest unsynchronised operation
};
std::map<cudaStream_t, Pending> g_stream_pending;  // non-blocking streams only

cudaStream_t CapturingStream() {
  for (const cudaStream_t s : g_streams) {
    if (s->capturing) return s;
  }
  return nullptr;
}

// Work issued to non-blocking stream `s` now.
void NonBlockingIssued(cudaStream_t s, const char* what) {
  if (!g_legacy_pending.empty()) {
    Report(Severity::kError, std::string("stream order: ") + what +
                                 " on a non-blocking stream while legacy-stream work (" + g_legacy_pending +
                                 ") may still be running: it is not ordered after that work");
  }
  g_stream_pending[s] = Pending{what, NextSequence()};
}

}  // namespace

bool IsValidStream(cudaStream_t s) { return s == nullptr || g_streams.count(s) != 0; }
bool IsCapturing(cudaStream_t s) { return s != nullptr && g_streams.count(s) != 0 && s->capturing; }

void LegacyIssued(const char* what) { g_legacy_pending = what; }
void LegacyDrained() { g_legacy_pending.clear(); }
void DeviceSynced() {
  g_legacy_pending.clear();
  g_stream_pending.clear();
}

void CheckLegacyUse(const char* what, const void* target) {
  const uint64_t allocated = target != nullptr ? AllocationSequence(target) : 0;
  for (const auto& [stream, pending] : g_stream_pending) {
    if (allocated > pending.sequence) continue;  // allocated after that work: cannot be its operand
    Report(Severity::kError, std::string("stream order: ") + what +
                                 " on the legacy default stream while a non-blocking stream has unsynchronised work (" +
                                 pending.what + "): they are not ordered");
  }
}

bool ProhibitedDuringCapture(const char* what) {
  const cudaStream_t s = CapturingStream();
  if (s == nullptr || s->mode == cudaStreamCaptureModeRelaxed) return false;
  Report(Severity::kWarning, std::string(what) + " called during stream capture: capture invalidated");
  s->invalidated = true;
  return true;
}

cudaError_t Enqueue(cudaStream_t s, const char* what, std::function<void()> op) {
  NoteUsed();
  if (!IsValidStream(s)) {
    Report(Severity::kError, std::string(what) + ": invalid stream handle (destroyed or never created)");
    return cudaErrorInvalidResourceHandle;
  }
  if (IsCapturing(s)) {
    s->capture->ops.push_back(std::move(op));
    return cudaSuccess;
  }
  const cudaStream_t capturing = CapturingStream();
  if (s == nullptr && capturing != nullptr && capturing->mode != cudaStreamCaptureModeRelaxed) {
    Report(Severity::kWarning, std::string(what) + " on the legacy default stream during capture: capture invalidated");
    capturing->invalidated = true;
    return cudaErrorStreamCaptureImplicit;
  }
  if (s == nullptr) {
    CheckLegacyUse(what, nullptr);
    LegacyIssued(what);
  } else if (s->flags & cudaStreamNonBlocking) {
    NonBlockingIssued(s, what);
  }
  op();
  return cudaSuccess;
}

}  // namespace emu::internal

using namespace emu::internal;

cudaError_t cudaDeviceSynchronize() {
  if (ProhibitedDuringCapture("cudaDeviceSynchronize")) return cudaErrorStreamCaptureUnsupported;
  DeviceSynced();
  return cudaSuccess;
}

// ---- streams -------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  NoteUsed();
  *s = new CUstream_st();
  (*s)->flags = flags;
  g_streams.insert(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr || g_streams.erase(s) == 0) {
    Report(Severity::kError, "cudaStreamDestroy of a stream that does not exist", false);
    return cudaErrorInvalidResourceHandle;
  }
  g_stream_pending.erase(s);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!IsValidStream(s)) return cudaErrorInvalidResourceHandle;
  if (IsCapturing(s)) {
    Report(Severity::kWarning, "cudaStreamSynchronize on a capturing stream: capture invalidated");
    s->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  if (s == nullptr) {
    if (ProhibitedDuringCapture("cudaStreamSynchronize(legacy stream)")) return cudaErrorStreamCaptureImplicit;
    g_legacy_pending.clear();  // the legacy stream does not wait for non-blocking streams
  } else {
    g_stream_pending.erase(s);
  }
  return cudaSuccess;
}

// Everything has completed at issue, so a query is a synchronisation.
cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  if (!IsValidStream(s) || g_events.count(e) == 0) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;  // the recorded work has already run
}

// ---- events ----------------------------------------------------------------------------
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  *e = new CUevent_st();
  g_events.insert(*e);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (g_events.erase(e) == 0) return cudaErrorInvalidResourceHandle;
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (g_events.count(e) == 0) return cudaErrorInvalidResourceHandle;
  return Enqueue(s, "cudaEventRecord", [e] { e->recorded = NextSequence(); });
}

// Simplification: treated as a device synchronisation for the order checker.
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (g_events.count(e) == 0) return cudaErrorInvalidResourceHandle;
  if (ProhibitedDuringCapture("cudaEventSynchronize")) return cudaErrorStreamCaptureUnsupported;
  DeviceSynced();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }

// There is no device clock: elapsed times are zero, never a measurement.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (g_events.count(start) == 0 || g_events.count(end) == 0) return cudaErrorInvalidResourceHandle;
  *ms = 0.f;
  return cudaSuccess;
}

// ---- capture and graphs ----------------------------------------------------------------
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  NoteUsed();
  if (s == nullptr || !IsValidStream(s)) return cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot capture
  if (s->capturing) return cudaErrorIllegalState;
  s->capturing = true;
  s->invalidated = false;
  s->mode = mode;
  s->capture = std::make_unique<Graph>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  *g = nullptr;
  if (!IsCapturing(s)) return cudaErrorIllegalState;
  s->capturing = false;
  std::unique_ptr<Graph> captured = std::move(s->capture);
  if (s->invalidated) return cudaErrorStreamCaptureInvalidated;
  auto* graph = new CUgraph_st();
  graph->graph = std::move(*captured);
  g_graphs.insert(graph);
  *g = graph;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  if (!IsValidStream(s)) return cudaErrorInvalidResourceHandle;
  *status = !IsCapturing(s)  ? cudaStreamCaptureStatusNone
            : s->invalidated ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long flags) {
  if (g_graphs.count(g) == 0) return cudaErrorInvalidResourceHandle;
  *exec = new CUgraphExec_st();
  (*exec)->graph = g->graph;  // a copy: the graph may be destroyed, the exec keeps running
  g_execs.insert(*exec);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (g_execs.count(exec) == 0) {
    Report(Severity::kError, "cudaGraphLaunch of a graph exec that does not exist (destroyed?)", false);
    return cudaErrorInvalidResourceHandle;
  }
  if (IsCapturing(s)) {
    Report(Severity::kError, "cudaGraphLaunch into a capturing stream: not emulated");
    return cudaErrorStreamCaptureUnsupported;
  }
  return Enqueue(s, "cudaGraphLaunch", [exec] {
    for (const auto& op : exec->graph.ops) op();
  });
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  if (g_graphs.erase(g) == 0) return cudaErrorInvalidResourceHandle;
  delete g;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (g_execs.erase(exec) == 0) return cudaErrorInvalidResourceHandle;
  delete exec;
  return cudaSuccess;
}
