// The tokenizer flags shared by beacon-serve and beacon-run, named as vLLM
// names them: --tokenizer takes the vocabulary and chat template from another
// file than the weights (a GGUF, vocab-only or not, or an HF directory), and
// --chat-template replaces the template with a Jinja file. Both are read
// when the model loads (Runtime::Create), which names the file on error.
#ifndef BEACON_CLI_TOKENIZER_FLAGS_H_
#define BEACON_CLI_TOKENIZER_FLAGS_H_

#include "engine/runtime.h"
#include "util/cli_args.h"

namespace beacon {

inline void DeclareTokenizerFlags(cli::Args* args) {
  args->Declare("tokenizer", false, "",
                "tokenizer and chat template from this GGUF (vocab-only is enough) or HF directory instead of "
                "--model's (with dummy: weights, a real vocabulary at a small shape)");
  args->Declare("chat-template", false, "", "Jinja file replacing the model's chat template");
}

inline void ParseTokenizerFlags(const cli::Args& args, RuntimeOptions* options) {
  options->tokenizer = args.Str("tokenizer");
  options->chat_template = args.Str("chat-template");
}

}  // namespace beacon

#endif  // BEACON_CLI_TOKENIZER_FLAGS_H_
