// Workload files teams already have, read into PromptEntry lists
// (`--dataset KIND:FILE`), and reproducible subsets of them:
//
// - sharegpt: the ShareGPT JSON of vLLM's benchmarks: a list of objects whose
//   `conversations` (or `conversation`) is a list of {"from", "value"} turns.
//   The prompt is the first human turn (from "human" or "user") after any
//   leading system turns, sent as raw text (one user message on openai-chat);
//   the turn after it is the reference answer, whose token count becomes
//   max_tokens with --reference-output-len. Entries without a human turn
//   followed by an answer are skipped (vLLM skips them too).
// - custom: vLLM's custom JSONL: {"prompt": "...", "output_tokens": N}, one
//   a line, output_tokens optional.
// - jsonl: beacon-loadtest's own JSONL (LoadPromptsJsonl, workload.h).
//
// A malformed file is INVALID_ARGUMENT naming the file and the line (JSONL)
// or the entry index (ShareGPT) and the field; an unreadable one NOT_FOUND.
#ifndef BEACON_LOADTEST_DATASET_H_
#define BEACON_LOADTEST_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/workload.h"

namespace beacon::loadtest {

enum class DatasetKind { kJsonl, kShareGpt, kCustom };

struct DatasetSpec {
  DatasetKind kind = DatasetKind::kJsonl;
  std::string path;
};

// "sharegpt:FILE", "custom:FILE" or "jsonl:FILE"; errors name --dataset.
absl::StatusOr<DatasetSpec> ParseDatasetSpec(absl::string_view spec);

absl::StatusOr<std::vector<PromptEntry>> LoadShareGpt(const std::string& path);
absl::StatusOr<std::vector<PromptEntry>> LoadCustomJsonl(const std::string& path);
absl::StatusOr<std::vector<PromptEntry>> LoadDataset(const DatasetSpec& spec);

// `n` entries drawn without replacement by a seeded shuffle (the same seed,
// the same subset in the same order), or all of them in file order when
// n == 0. n larger than the dataset is INVALID_ARGUMENT.
absl::StatusOr<std::vector<PromptEntry>> SampleDataset(std::vector<PromptEntry> entries, int64_t n, uint64_t seed);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_DATASET_H_
