// The device flags (cli/device_flags.h) and the device spec they carry
// (ParseDeviceSpec): every form Runtime accepts, and an error naming the flag
// for each malformed one.
#include "cli/device_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace beacon {
namespace {

absl::Status Parse(std::vector<std::string> argv, RuntimeOptions* out) {
  cli::Args args;
  DeclareDeviceFlags(&args);
  argv.insert(argv.begin(), "prog");
  std::vector<char*> ptrs;
  for (std::string& a : argv) ptrs.push_back(a.data());
  if (absl::Status s = args.Parse(static_cast<int>(ptrs.size()), ptrs.data()); !s.ok()) return s;
  return ParseDeviceFlags(args, out);
}

TEST(DeviceSpec, CpuCudaAndAnOrdinal) {
  int ordinal = 7;
  EXPECT_EQ(*ParseDeviceSpec("cpu", &ordinal), false);
  EXPECT_EQ(*ParseDeviceSpec("cuda", &ordinal), true);
  EXPECT_EQ(ordinal, 7);  // "cuda" keeps the configured ordinal
  EXPECT_EQ(*ParseDeviceSpec("cuda:3", &ordinal), true);
  EXPECT_EQ(ordinal, 3);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA", "cuda:1:2", ""}) {
    absl::StatusOr<bool> r = ParseDeviceSpec(bad, &ordinal);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("cpu, cuda, cuda:N"), std::string::npos) << r.status();
  }
}

TEST(DeviceFlags, DefaultsAreTheCpuAndTheBackendsDefaults) {
  RuntimeOptions ro;
  ASSERT_TRUE(Parse({}, &ro).ok());
  EXPECT_EQ(ro.device, "cpu");
  EXPECT_TRUE(ro.cuda.cuda_graphs);
  EXPECT_EQ(ro.cuda.max_splits, CudaBackendOptions{}.max_splits);
  EXPECT_FALSE(ro.cuda.tensor_core_decode);
  EXPECT_FALSE(ro.cuda.small_batch_gemv);
  EXPECT_FALSE(ro.cuda.flashinfer_decode);
  EXPECT_TRUE(ro.cuda.tensor_core_score);
  EXPECT_FALSE(ro.cuda.programmatic_launch);
  EXPECT_EQ(ro.kv_cache_dtype, DType::kBF16) << "the KV cache is bf16 unless asked otherwise";
}

TEST(DeviceFlags, KvCacheDTypeReachesTheOptions) {
  for (auto [arg, want] : {std::pair{"f32", DType::kF32}, {"bf16", DType::kBF16}, {"auto", DType::kBF16}}) {
    RuntimeOptions ro;
    ASSERT_TRUE(Parse({"--kv-cache-dtype", arg}, &ro).ok()) << arg;
    EXPECT_EQ(ro.kv_cache_dtype, want) << arg;
  }
}

TEST(DeviceFlags, CudaKnobsReachTheOptions) {
  RuntimeOptions ro;
  ASSERT_TRUE(Parse({"--device", "cuda:1", "--no-cuda-graphs", "--cuda-max-splits", "4", "--cuda-tensor-core-decode",
                     "--cuda-small-batch-gemv", "--no-cuda-tensor-core-score", "--cuda-programmatic-launch",
                     "--cuda-flashinfer-decode"},
                    &ro)
                  .ok());
  EXPECT_EQ(ro.device, "cuda:1");
  EXPECT_FALSE(ro.cuda.cuda_graphs);
  EXPECT_EQ(ro.cuda.max_splits, 4);
  EXPECT_TRUE(ro.cuda.tensor_core_decode);
  EXPECT_TRUE(ro.cuda.small_batch_gemv);
  EXPECT_FALSE(ro.cuda.tensor_core_score);
  EXPECT_TRUE(ro.cuda.programmatic_launch);
  EXPECT_TRUE(ro.cuda.flashinfer_decode);
  EXPECT_TRUE(ro.cuda.Validate().ok());
  RuntimeOptions explicit_value;
  ASSERT_TRUE(Parse({"--cuda-graphs=false"}, &explicit_value).ok());
  EXPECT_FALSE(explicit_value.cuda.cuda_graphs);
}

TEST(DeviceFlags, MalformedValuesNameTheirFlag) {
  struct Case {
    std::vector<std::string> argv;
    const char* flag;
  };
  for (const Case& c : std::vector<Case>{{{"--device", "tpu"}, "--device"},
                                         {{"--cuda-graphs=yes"}, "--cuda-graphs"},
                                         {{"--cuda-graphs", "false"}, "--cuda-graphs=false"},
                                         {{"--cuda-max-splits", "0"}, "--cuda-max-splits"},
                                         {{"--cuda-max-splits", "2048"}, "--cuda-max-splits"},
                                         {{"--kv-cache-dtype", "fp8"}, "--kv-cache-dtype"}}) {
    RuntimeOptions ro;
    absl::Status s = Parse(c.argv, &ro);
    ASSERT_FALSE(s.ok()) << c.flag;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.flag), std::string::npos) << s;
  }
}

TEST(DeviceFlags, BackendOptionsValidateTheKernelLimits) {
  CudaBackendOptions o;
  o.max_splits = 0;
  EXPECT_FALSE(o.Validate().ok());
  o.max_splits = 1024;
  EXPECT_TRUE(o.Validate().ok());
  o.device = -1;
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace beacon
