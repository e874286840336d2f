// beacon-logits: the logits of every position of a token sequence, for
// comparison against independent references (tests/reference/).
//
//   beacon-logits --model PATH --token-ids 1,2,3 --out FILE [--chunk N] [--companions K]
//
// The sequence is prefilled in chunks of N tokens while K unrelated sequences
// run in the same ragged batches (companion i feeds i+1 tokens per step), so
// the output also checks that batching does not change a sequence's logits.
// FILE gets raw little-endian float32 [n_tokens][vocab]; stdout one JSON line.
#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/runtime.h"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "beacon-logits: %s\n", std::string(s.message()).c_str());
  return 2;
}

int Main(int argc, char** argv) {
  cli::Args args;
  args.Declare("model", false, "models/default.gguf", "model spec");
  args.Declare("token-ids", false, "", "the sequence: comma-separated token ids (required)");
  args.Refuse("tokens", "--tokens was renamed --token-ids (a list of token ids)");
  args.Declare("out", false, "", "output file: raw little-endian float32 [n_tokens][vocab] (required)");
  args.Declare("chunk", false, "0", "prefill chunk size (0 = all at once)");
  args.Declare("companions", false, "0", "other sequences batched alongside");
  args.Declare("threads", false, "0", "CPU threads (0 = all)");
  args.Declare("kv-cache-dtype", false, "auto", "KV cache element type: auto (= bf16), bf16, q8_0, f32");
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) return Fail(s);
  if (args.help()) {
    std::printf("%s", args.Help("usage: beacon-logits --model PATH --token-ids 1,2,3 --out FILE [options]\n"
                                "The logits of every position; stdout gets one JSON line.")
                          .c_str());
    return 0;
  }
  if (!args.positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'"));
  }
  absl::StatusOr<std::vector<int32_t>> parsed = args.IntList("token-ids");
  if (!parsed.ok()) return Fail(parsed.status());
  const std::vector<int32_t> tokens = std::move(*parsed);
  if (tokens.empty()) return Fail(absl::InvalidArgumentError("--token-ids is empty"));
  if (args.Str("out").empty()) return Fail(absl::InvalidArgumentError("--out is required"));
  absl::StatusOr<int64_t> chunk = args.Int("chunk"), companions = args.Int("companions"), threads = args.Int("threads");
  for (const absl::Status& s : {chunk.status(), companions.status(), threads.status()}) {
    if (!s.ok()) return Fail(s);
  }
  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.threads = static_cast<int>(*threads);
  absl::StatusOr<DType> kv_dtype = ParseKvCacheDType(args.Str("kv-cache-dtype"));
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  ro.kv_cache_dtype = *kv_dtype;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) return Fail(rt.status());
  const ModelConfig& cfg = (*rt)->config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t step = *chunk > 0 ? *chunk : n;
  const int n_comp = static_cast<int>(*companions);

  absl::StatusOr<std::unique_ptr<KvCache>> made_cache = (*rt)->MakeKvCache((n + 16) * (1 + n_comp) + 16 * (1 + n_comp));
  if (!made_cache.ok()) return Fail(made_cache.status());
  std::unique_ptr<KvCache> cache = *std::move(made_cache);
  SequenceKv main_kv(cache.get());
  std::vector<SequenceKv> comp_kv;
  std::vector<std::vector<int32_t>> comp_tokens(n_comp);
  for (int i = 0; i < n_comp; ++i) {
    comp_kv.emplace_back(cache.get());
    for (int64_t j = 0; j < n + 8; ++j)
      comp_tokens[i].push_back(static_cast<int32_t>((j * 7919 + i * 104729 + 17) % cfg.vocab_size));
  }
  std::vector<float> out;
  std::vector<float> logits;
  std::vector<int64_t> comp_done(n_comp, 0);
  for (int64_t done = 0; done < n;) {
    std::vector<ForwardEntry> batch;
    const int64_t len = std::min(step, n - done);
    ForwardEntry e;
    e.kv = &main_kv;
    e.tokens = std::span<const int32_t>(tokens).subspan(done, len);
    e.start_pos = static_cast<int32_t>(done);
    e.all_logits = true;
    // Companions go first in half the steps and after in the others, so the
    // main sequence is not always at the same batch offset.
    for (int i = 0; i < n_comp; ++i) {
      const int64_t clen = std::min<int64_t>(i + 1, comp_tokens[i].size() - comp_done[i]);
      if (clen <= 0) continue;
      ForwardEntry c;
      c.kv = &comp_kv[i];
      c.tokens = std::span<const int32_t>(comp_tokens[i]).subspan(comp_done[i], clen);
      c.start_pos = static_cast<int32_t>(comp_done[i]);
      batch.push_back(c);
      comp_done[i] += clen;
    }
    const size_t main_index = (done / step) % 2 == 0 ? 0 : batch.size();
    batch.insert(batch.begin() + main_index, e);
    if (absl::Status s = (*rt)->backend()->Forward(batch, &logits); !s.ok()) return Fail(s);
    size_t row = 0;
    for (size_t b = 0; b < main_index; ++b) row += batch[b].all_logits ? batch[b].tokens.size() : 1;
    out.insert(out.end(), logits.begin() + row * cfg.vocab_size, logits.begin() + (row + len) * cfg.vocab_size);
    done += len;
  }
  std::ofstream f(args.Str("out"), std::ios::binary);
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
  if (!f) return Fail(absl::InternalError("cannot write " + args.Str("out")));
  std::printf("{\"n_tokens\":%lld,\"vocab\":%d}\n", static_cast<long long>(n), cfg.vocab_size);
  return 0;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-logits", &beacon::Main, argc, argv); }
