// The kernel sequence of one CUDA forward step, and its CUDA graphs.
//
// Per step (n tokens, r logits rows), on the backend's stream:
//   resid = embed(ids)
//   xb = rmsnorm(resid, attn_norm[0])
//   per layer l:
//     qkv = xb Wqkv^T                       (cuBLAS)
//     q = rope(norm(q + b)); k, v -> cache  (QkvRopeKvWrite; q_pre for BeaconKV)
//     BeaconKV: ring + FPS update           (per group of beacon sequences;
//                                            decode steps: once after the last layer)
//     att = attention(q, cache)             (decode split-K or FlashInfer, or prefill tiles)
//     proj = att Wo^T
//     resid += proj; xb = rmsnorm(resid, ffn_norm[l])       (fused)
//     gate_up = xb Wgu^T; ffn = silu(gate) * up  (one kernel on the GEMV path)
//     proj = ffn Wdown^T
//     resid += proj; xb = rmsnorm(resid, next norm)         (fused; the
//                                     next layer's attn_norm, or output_norm)
//   rows = xb[logit_rows]  (skipped when every token wants logits)
//   logits = rows Wout^T (fp32); greedy: ids = argmax(logits)
// With CudaBackendOptions::programmatic_launch, the step's own kernels
// (embedding, norms, QKV prep, decode attention, SwiGLU, row gather, argmax,
// the matrix-vector projections) launch with programmatic dependent launch
// (kernels/cuda/kernel_stream.h); cuBLAS, prefill attention, BeaconKV's
// observation and sampling launch as before, each a full stream barrier.
// Everything reads its metadata from the packed plan at meta_ (forward_plan.h),
// so the same launches replay as a graph for the next step of that shape.
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/cuda/beacon_state.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gather_rows.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/qkv_rope_kv_write.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/token_bitmask.h"
#include "util/log.h"

namespace beacon {

absl::Status CudaBackend::Enqueue(const PagedKv& kv, Output output) {
  const ModelConfig& c = config_;
  const int64_t n = plan_.n_tokens;
  const int32_t* meta = meta_.as<int32_t>();
  BEACON_CUDA_RETURN_IF_ERROR(LaunchEmbedding(weights_.tok_embd(), c.vocab_size, c.hidden,
                                              meta + plan_.offsets.token_ids, n, resid_, nullptr, step_stream()));
  BEACON_CUDA_RETURN_IF_ERROR(
      LaunchRmsNorm(resid_, weights_.layer(0).attn_norm, xb_, n, c.hidden, c.rms_eps, step_stream()));
  for (int l = 0; l < c.n_layers; ++l) {
    if (absl::Status s = Layer(l, kv); !s.ok()) return s;
  }
  if (defer_observe_) {
    if (absl::Status s = Observe(0, c.n_layers); !s.ok()) return s;
  }
  const __nv_bfloat16* head_in = xb_;
  if (!plan_.rows_are_tokens) {
    BEACON_CUDA_RETURN_IF_ERROR(
        LaunchGatherRows(xb_, meta + plan_.offsets.logit_rows, plan_.n_rows, c.hidden, rows_, step_stream()));
    head_in = rows_;
  }
  if (absl::Status s = gemm_.Linear(weights_.output(), c.vocab_size, c.hidden, head_in, plan_.n_rows, logits_,
                                    /*y_f32=*/true);
      !s.ok()) {
    return s;
  }
  if (output == Output::kGreedy) {
    BEACON_CUDA_RETURN_IF_ERROR(LaunchArgmax(logits_, plan_.n_rows, c.vocab_size, tokens_, step_stream()));
  } else if (output == Output::kSample) {
    if (masked_) {
      BEACON_CUDA_RETURN_IF_ERROR(
          LaunchApplyTokenBitmask(logits_, plan_.n_rows, c.vocab_size, masks_dev_.as<uint32_t>(), stream_));
    }
    const size_t cap_params = (cap_rows_ * sizeof(DeviceSamplingParams) + 255) / 256 * 256;
    BEACON_CUDA_RETURN_IF_ERROR(
        LaunchSample(logits_, plan_.n_rows, c.vocab_size, sampling_dev_.as<DeviceSamplingParams>(), tokens_,
                     sampling_dev_.as<char>() + cap_params, sampling_workspace_bytes_, stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Layer(int l, const PagedKv& kv) {
  const ModelConfig& c = config_;
  const DeviceLayerWeights& w = weights_.layer(l);
  const int64_t n = plan_.n_tokens;
  const int32_t* meta = meta_.as<int32_t>();
  const int qkv_dim = c.q_dim() + 2 * c.kv_dim();
  const BlockTables tables{meta + plan_.offsets.block_tables, plan_.stride};
  const int32_t* tok_seq = meta + plan_.offsets.tok_seq;
  const int32_t* tok_slot = meta + plan_.offsets.tok_slot;
  const int32_t* tok_pos = meta + plan_.offsets.tok_pos;

  if (absl::Status s = gemm_.Linear(w.wqkv, qkv_dim, c.hidden, xb_, n, qkv_); !s.ok()) return s;
  QkvPrepParams prep;
  prep.qkv = qkv_;
  prep.n_tokens = n;
  prep.n_q_heads = c.n_heads;
  prep.n_kv_heads = c.n_kv_heads;
  prep.head_dim = c.head_dim;
  prep.bias = w.bqkv;
  prep.q_norm = w.q_norm;
  prep.k_norm = w.k_norm;
  prep.eps = c.rms_eps;
  prep.rope = evict_ctx_.rope;
  prep.q_pre_rope = groups_.empty() ? nullptr : ObserveQueries(l);
  BEACON_CUDA_RETURN_IF_ERROR(LaunchQkvRopeKvWrite(prep, kv, l, tables, tok_seq, tok_slot, tok_pos, step_stream()));
  if (!groups_.empty() && !defer_observe_) {
    if (absl::Status s = Observe(l, 1); !s.ok()) return s;
  }

  PagedAttentionParams a;
  a.q = qkv_;
  a.q_token_stride = qkv_dim;
  a.out = att_;
  a.kv = kv;
  a.layer = l;
  a.n_q_heads = c.n_heads;
  a.tables = tables;
  a.tok_seq = tok_seq;
  a.tok_slot = tok_slot;
  a.n_tokens = n;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (plan_.all_decode && options_.flashinfer_decode) {
    BEACON_CUDA_RETURN_IF_ERROR(flashinfer_.Launch(a, meta, plan_, step_stream()));
  } else if (plan_.all_decode) {
    const DecodeAttentionKernel kernel =
        options_.tensor_core_decode ? DecodeAttentionKernel::kMma : DecodeAttentionKernel::kSimt;
    BEACON_CUDA_RETURN_IF_ERROR(LaunchDecodeAttention(a, options_.max_splits, attn_workspace_, step_stream(), kernel));
  } else {
    BEACON_CUDA_RETURN_IF_ERROR(LaunchPrefillAttention(a, meta + plan_.offsets.seq_first, meta + plan_.offsets.seq_n,
                                                       static_cast<int>(plan_.n_seqs), plan_.max_seq_tokens, stream_));
  }
  if (absl::Status s = gemm_.Linear(w.wo, c.hidden, c.q_dim(), att_, n, proj_); !s.ok()) return s;
  BEACON_CUDA_RETURN_IF_ERROR(
      LaunchFusedAddRmsNorm(proj_, resid_, w.ffn_norm, xb_, n, c.hidden, c.rms_eps, step_stream()));

  if (absl::Status s = gemm_.GateUpSwiGlu(w.w_gate_up, c.ffn_hidden, c.hidden, xb_, n, gate_up_, ffn_); !s.ok()) {
    return s;
  }
  if (absl::Status s = gemm_.Linear(w.w_down, c.hidden, c.ffn_hidden, ffn_, n, proj_); !s.ok()) return s;
  const __nv_bfloat16* next_norm = l + 1 < c.n_layers ? weights_.layer(l + 1).attn_norm : weights_.output_norm();
  BEACON_CUDA_RETURN_IF_ERROR(
      LaunchFusedAddRmsNorm(proj_, resid_, next_norm, xb_, n, c.hidden, c.rms_eps, step_stream()));
  return absl::OkStatus();
}

float* CudaBackend::ObserveQueries(int l) const {
  if (!defer_observe_) return q_pre_;
  return observe_q_.as<float>() + static_cast<int64_t>(l) * plan_.n_tokens * config_.q_dim();
}

float* CudaBackend::ObserveMeans(int l) const {
  if (!defer_observe_) return q_mean_;
  const int64_t queries = static_cast<int64_t>(config_.n_layers) * cap_observe_q_ * config_.q_dim();
  return observe_q_.as<float>() + queries + static_cast<int64_t>(l) * plan_.n_tokens * config_.kv_dim();
}

absl::Status CudaBackend::Observe(int first_layer, int n_layers) {
  const ModelConfig& c = config_;
  const int64_t n = plan_.n_tokens;
  const int32_t* tok_pos = meta_.as<int32_t>() + plan_.offsets.tok_pos;
  // The layers' rows lie back to back ([layer][token]), so one group-means
  // launch covers them all.
  const float* q_pre = ObserveQueries(first_layer);
  float* q_mean = ObserveMeans(first_layer);
  bool means = false;  // q_mean holds these layers' group means
  for (const BeaconGroup& g : groups_) {
    const float* q = q_pre;
    int64_t width = c.q_dim();
    if (g.dims.n_heads != c.n_heads) {  // group-shared state: the state heads are the KV heads
      if (!means) {
        BEACON_CUDA_RETURN_IF_ERROR(LaunchBeaconGroupMeans(q_pre, n * n_layers, c.n_heads, c.n_heads / g.dims.n_heads,
                                                           c.head_dim, q_mean, stream_));
        means = true;
      }
      q = q_mean;
      width = static_cast<int64_t>(g.dims.n_heads) * c.head_dim;
    }
    BEACON_CUDA_RETURN_IF_ERROR(LaunchBeaconObserveLayers(g.dims, first_layer, n_layers,
                                                          observe_dev_.as<BeaconObserveEntry>() + g.offset, g.count,
                                                          plan_.max_seq_tokens, q, n * width, tok_pos, stream_));
  }
  return absl::OkStatus();
}

std::string CudaBackend::GraphKey(const PagedKv& kv, Output output) const {
  std::string key = absl::StrFormat("%p/%d/%d/%d/%d/%d", static_cast<const void*>(kv.k), plan_.n_tokens, plan_.n_rows,
                                    plan_.stride, static_cast<int>(output), masked_ ? 1 : 0);
  if (options_.flashinfer_decode) key += flashinfer_.GraphKeyPart();
  for (const BeaconGroup& g : groups_) {
    absl::StrAppendFormat(&key, "|%d,%d,%d,%d,%d", g.offset, g.count, g.dims.recent, g.dims.beacons, g.dims.fps_bound);
  }
  return key;
}

void CudaBackend::DropGraphs() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  seen_shapes_.clear();
}

absl::Status CudaBackend::Launch(const PagedKv& kv, Output output) {
  if (!options_.cuda_graphs || !plan_.all_decode) return Enqueue(kv, output);
  const std::string key = GraphKey(kv, output);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // A shape runs directly the first time: lazily loaded kernels, cuBLAS's
    // algorithm choice and the kernels' shared-memory attributes are then
    // settled before a capture, where first-use work is not allowed.
    if (seen_shapes_.insert(key).second) return Enqueue(kv, output);
    BEACON_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const absl::Status enqueued = Enqueue(kv, output);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaErrorUnknown;
    if (enqueued.ok() && end == cudaSuccess) inst = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!enqueued.ok() || end != cudaSuccess || inst != cudaSuccess) {
      // Capture is an optimisation: if this CUDA stack refuses it, say so
      // once and run every later step directly.
      cudaGetLastError();
      logging::Warn("CUDA graph capture failed (%s%s); running steps without graphs",
                    enqueued.ok() ? "" : std::string(enqueued.message()),
                    enqueued.ok() ? cudaGetErrorString(end != cudaSuccess ? end : inst) : "");
      options_.cuda_graphs = false;
      DropGraphs();
      return Enqueue(kv, output);
    }
    it = graphs_.emplace(key, exec).first;
    ++graphs_captured_;
  }
  BEACON_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second, stream_));
  ++graph_replays_;
  return absl::OkStatus();
}

}  // namespace beacon
