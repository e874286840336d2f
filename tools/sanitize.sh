#!/usr/bin/env bash
# Builds and runs the CPU kernel, kv, scheduler, engine, serving, cli and
# server tests under a sanitizer (make sanitize; part of make test, so CI runs
# both variants), and under AddressSanitizer + UBSan also the parsers of
# untrusted input and what reads model files: GGUF, tokenizer, Jinja, model
# (config.json, safetensors) and the load tester's (issue 35), and replays
# every fuzz corpus (issue 46).
#
#   tools/sanitize.sh address build-asan   # AddressSanitizer + UBSan
#   tools/sanitize.sh thread build-tsan    # ThreadSanitizer (+ -Wthread-safety as errors)
#
# Both build with clang (the Release build is GCC's, so CI sees both
# compilers' warnings): under a sanitizer it compiles our files 20-40% faster
# than GCC, and both trees precompile the common headers (BEACON_PCH,
# tools/precompiled.h), which CI's time needs on a 2-core machine.
#
# Only the test binaries are built, at -O1 with line tables, without CUDA: a
# sanitizer build of the whole tree would not fit CI's time. The Python
# end-to-end tests are not run here (they would need a sanitized beacon-serve
# and triple their time); the C++ server tests drive real sockets, real gRPC
# and the real HTTP server.
set -euo pipefail
kind=${1:?address or thread}
dir=${2:?build directory}
cd "$(dirname "$0")/.."
targets=(kernels_cpu_tests kv_tests scheduler_tests engine_tests serving_tests cli_tests server_tests)
# The parsers' and model readers' tests run single-threaded code, where
# ThreadSanitizer finds nothing, so only ASan takes them all. TSan takes the
# tokenizer tests: one of them encodes, streams and renders chat templates from
# four threads at once, as the server's front-end threads share one tokenizer.
case "$kind" in
  address) targets+=(gguf_tests tokenizer_tests jinja_tests model_tests loadtest_tests loadtest_cli_tests) ;;
  thread) targets+=(tokenizer_tests) ;;
esac
# The engine tests that decode hundreds of steps on the real model
# (CompressionTest, PreemptTest: 90 s in Release, 4x under ASan, 10x under
# TSan) are left out of both: they run the same forward pass, compression
# and preemption code that GenerationTest, CpuBackendTest and the kv tests
# cover in short runs, and the Release ctest run covers them whole. Without
# the filter the two sanitizer runs would not fit CI's time.
# PrefixCacheEveryPolicyTest serves the real model 14 times, twice per policy
# (65 s in Release, ~430 s under ASan): ASan runs its `beacon` instance, the
# shipped policy (a policy added later runs too until it is named here), and
# TSan none. TSan also leaves out the two longest real-model runs whose code
# shorter tests there walk too (75 and 110 s under TSan on 2 cores):
# OptimisticAdmissionReusesToo (SampleGroupTest.OptimisticAdmissionSharesToo
# and the other prefix-cache tests) and BatchOfGrammarsGreedyAndSampled
# (ReasoningIsNeverMasked batches a grammar's row with a free one). ASan and
# the Release run take them whole. TSan leaves out, too, what adds time and no
# thread interaction that a kept test lacks: the KV-dtype closeness runs (260
# single-sequence steps, twice per type: 116 of engine_tests' 297 s under TSan;
# ASan keeps them for the bf16/q8_0 read and write paths), and two of the three
# engine-against-simulator policies (interval_1 keeps the engine thread's
# lockstep with the simulator; 13 s each).
every_policy=PrefixCache/PrefixCacheEveryPolicyTest.GreedyOutputIsTheSameWithTheCacheOn
asan_serving="-$every_policy/full:$every_policy/streaming:$every_policy/h2o:$every_policy/snapkv"
asan_serving+=":$every_policy/rkv:$every_policy/random"
sim=Policies/GenerationEngineSimTest.SameSlotCountsAtEveryStep
declare -A filters=([thread,engine_tests]="-CompressionTest.*:PreemptTest.*:GenerationGrammarTest.BatchOfGrammarsGreedyAndSampled:Types/KvCacheCloseness.*"
                    [address,engine_tests]="-CompressionTest.*:PreemptTest.*"
                    [address,serving_tests]="$asan_serving"
                    [thread,serving_tests]="-$every_policy/*:PrefixCacheTest.OptimisticAdmissionReusesToo:$sim/drop_prompt:$sim/keep_prompt")
jobs=${JOBS:-$(nproc)}

flags=(-G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug
       "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" "-DCMAKE_C_FLAGS_DEBUG=-O1 -g1" -DBEACON_WITH_CUDA=OFF -DBEACON_SANITIZE="$kind" -DBEACON_PCH=ON)
case "$kind" in
  address) ;;
  thread) flags+=("-DCMAKE_CXX_FLAGS=-Werror=thread-safety") ;;
  *) echo "sanitize.sh: kind must be address or thread, got '$kind'" >&2; exit 2 ;;
esac
# Under ASan + UBSan also the fuzz corpora (seeds and regression inputs), through the entry points the
# fuzzers run (tests/fuzz/replay_main.cc; issue 46): target:corpus.
replays=()
[ "$kind" = address ] && replays=(gguf:tests/fuzz/corpus jinja:tests/fuzz/jinja_corpus
  tokenizer:tests/fuzz/tokenizer_corpus openai:tests/fuzz/openai_corpus grpc:tests/fuzz/grpc_corpus
  model_files:tests/fuzz/model_files_corpus)
# A tree an older sanitize.sh configured (GCC, no precompiled headers) is not
# reconfigured behind the user's back: say so and stop.
if [ -f "$dir/CMakeCache.txt" ] && ! grep -q '^BEACON_PCH:BOOL=ON' "$dir/CMakeCache.txt"; then
  echo "sanitize.sh: $dir was configured by an older tools/sanitize.sh (GCC, no BEACON_PCH); remove it and rerun" >&2
  exit 2
fi
[ -f "$dir/CMakeCache.txt" ] || cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j "$jobs" --target "${targets[@]}" "${replays[@]/%:*/_fuzz_replay}"

supp="$PWD/tools/sanitizers"
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
status=0
for t in "${targets[@]}"; do
  start=$(date +%s)
  filter=${filters[$kind,$t]:-*}
  if "$dir/bin/$t" --gtest_brief=1 --gtest_filter="$filter" > "$dir/$t.log" 2>&1; then
    echo "sanitize ($kind): $t passed ($(( $(date +%s) - start )) s)"
  else
    echo "sanitize ($kind): $t FAILED; the last lines of $dir/$t.log:"
    tail -60 "$dir/$t.log"
    status=1
  fi
done
for r in "${replays[@]}"; do
  t=${r%%:*}_fuzz_replay
  if "$dir/bin/$t" "${r#*:}" > "$dir/$t.log" 2>&1; then
    echo "sanitize ($kind): $t passed ($(tail -1 "$dir/$t.log"))"
  else
    echo "sanitize ($kind): $t FAILED; the last lines of $dir/$t.log:"
    tail -60 "$dir/$t.log"
    status=1
  fi
done
exit $status
