// The beacon.v1.ModelInfo that GetModelInfo returns: what a client needs to
// size requests (context, EOS ids, limits) and to choose a KV policy (each
// policy, whether this server allows it, its defaults).
#ifndef BEACON_SERVER_GRPC_MODEL_INFO_H_
#define BEACON_SERVER_GRPC_MODEL_INFO_H_

#include <cstdint>
#include <string>

#include "engine/serving/serve_request.h"
#include "model/model_config.h"
#include "model/tokenizer/tokenizer.h"
#include "proto/beacon/v1/beacon.pb.h"
#include "scheduler/scheduler.h"

namespace beacon {

// `model` as the operator named it (--model); `pool_tokens` the KV pool's
// slots after rounding to whole blocks.
v1::ModelInfo MakeModelInfo(const std::string& model, const ModelConfig& c, const Tokenizer& tok,
                            const ServeLimits& limits, const SchedulerConfig& sched, int block_size,
                            int64_t pool_tokens);

}  // namespace beacon

#endif  // BEACON_SERVER_GRPC_MODEL_INFO_H_
