#include "engine/cuda/beacon_device_state.h"

namespace beacon {

absl::StatusOr<std::unique_ptr<BeaconDeviceState>> BeaconDeviceState::Create(const BeaconDims& dims,
                                                                             cudaStream_t stream) {
  auto s = std::unique_ptr<BeaconDeviceState>(new BeaconDeviceState());
  s->dims_ = dims;
  const BeaconStateLayout layout = BeaconStateLayout::For(dims);
  if (absl::Status st = s->memory_.Allocate(layout.total_bytes, "a BeaconKV query ring and FPS buffers"); !st.ok()) {
    return st;
  }
  s->data_ = s->memory_.get();
  // On the stream the observe kernels run on, so they see it zeroed: a plain
  // cudaMemset runs on the legacy default stream, which the backend's
  // non-blocking stream does not wait for.
  BEACON_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->memory_.get(), 0, layout.total_bytes, stream));
  return s;
}

BeaconDims BeaconDimsFor(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  BeaconDims d{};
  d.n_layers = m.n_layers;
  // Group-shared state: one state head per KV head, holding the group's mean
  // query (LaunchBeaconGroupMeans); scoring then sees groups of one.
  d.n_heads = o.beacon_group_queries ? m.n_kv_heads : m.n_heads;
  d.n_kv_heads = m.n_kv_heads;
  d.head_dim = m.head_dim;
  d.recent = o.recent_queries;
  d.beacons = o.beacons;
  d.fps_bound = o.fps_bound;
  return d;
}

absl::StatusOr<std::unique_ptr<BeaconDeviceState>> BeaconDeviceState::FromPool(std::shared_ptr<BeaconStatePool> pool,
                                                                               cudaStream_t stream) {
  absl::StatusOr<void*> p = pool->Acquire(stream);
  if (!p.ok()) return p.status();
  auto s = std::unique_ptr<BeaconDeviceState>(new BeaconDeviceState());
  s->dims_ = pool->dims();
  s->data_ = *p;
  s->pool_ = std::move(pool);
  return s;
}

BeaconDeviceState::~BeaconDeviceState() {
  if (pool_ != nullptr) pool_->Release(data_);
}

bool operator==(const BeaconDims& a, const BeaconDims& b) {
  return a.n_layers == b.n_layers && a.n_heads == b.n_heads && a.n_kv_heads == b.n_kv_heads &&
         a.head_dim == b.head_dim && a.recent == b.recent && a.beacons == b.beacons && a.fps_bound == b.fps_bound;
}

absl::StatusOr<BeaconDeviceState*> BeaconStateOf(KvPolicy* policy, const PolicyModelInfo& model, cudaStream_t stream,
                                                 const std::shared_ptr<BeaconStatePool>& pool) {
  if (auto* s = dynamic_cast<BeaconDeviceState*>(policy->device_state()); s != nullptr) return s;
  const BeaconDims dims = BeaconDimsFor(policy->options(), model);
  absl::StatusOr<std::unique_ptr<BeaconDeviceState>> created = pool != nullptr && pool->dims() == dims
                                                                   ? BeaconDeviceState::FromPool(pool, stream)
                                                                   : BeaconDeviceState::Create(dims, stream);
  if (!created.ok()) return created.status();
  BeaconDeviceState* raw = created->get();
  policy->set_device_state(std::move(*created));
  return raw;
}

}  // namespace beacon
