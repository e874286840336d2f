#!/usr/bin/env bash
# The CUDA engine's checks on a GPU machine, in one run (issues 9 and 44):
# the CUDA tests, `beacon-bench cuda` and the PyTorch peer on the same shapes
# in the same run, an Nsight Compute profile of decode steps by phase, and
# beacon-serve on the GPU under a load test. Each stage runs under its own
# timeout; stages that no longer fit the deadline are skipped and say so.
#
# Binaries, one of:
#   - .gpu-bundle/bundle.tar.xz (tools/gpu-bundle.sh, here): every binary
#     built on the Debian machine, with its libraries; nothing is built there.
#     Device tool: carry [".gpu-bundle"]. The only route that has beacon-serve.
#   - .gpu-deps (tools/gpu-deps.sh): abseil, GoogleTest and nlohmann-json;
#     cuda_tests and beacon-bench are built there (about 36 s on 16 cores),
#     without the server.
#
# Results: the raw files in $WORK (default /tmp/gpu-check), packed after every
# stage into $OUT/gpu-check.tar.gz, and the summary in $OUT/summary.txt (the
# device tool brings back at most 8 files). Unpack into bench/results/.
#
# Environment: OUT (default build-gpu/out), STAGES (default
# "tests serve bench peer mma flashinfer fitc gemv pdl profile long group score sanitize"; they run in
# the order tests, serve, then per shape bench peer mma flashinfer fitc, profile, then per shape gemv
# pdl, then long group score sanitize: what matters most first, as the deadline skips the last), DEADLINE (seconds for the whole run,
# default 560), SHAPES (default "qwen3-4b:1024 deepseek-r1-distill-qwen-7b:4096":
# config and decode context), BATCHES (default 1,16,64), BENCH_ARGS (extra
# beacon-bench cuda arguments), JOBS.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out="${OUT:-$root/build-gpu/out}"
work="${WORK:-/tmp/gpu-check}"
stages="${STAGES:-tests serve bench peer mma flashinfer fitc gemv pdl profile long group score sanitize}"
deadline=$(( $(date +%s) + ${DEADLINE:-560} ))
shapes="${SHAPES:-qwen3-4b:1024 deepseek-r1-distill-qwen-7b:4096}"
batches="${BATCHES:-1,16,64}"
mkdir -p "$out" "$work"
t0=$(date +%s)
stamp() { echo "[gpu-check +$(( $(date +%s) - t0 ))s] $*"; }
pack() { tar -C "$work" -czf "$out/gpu-check.tar.gz" . 2>/dev/null; }
# run STAGE_NAME SECONDS CMD...: CMD under `timeout`, skipped when the deadline
# leaves less than SECONDS; its status is recorded in $work/stages.txt.
run() {
  local name=$1 secs=$2
  shift 2
  local left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt "$secs" ]; then
    stamp "skip $name: ${left}s left of the deadline, it needs up to ${secs}s"
    echo "$name skipped (deadline)" >> "$work/stages.txt"
    return 0
  fi
  stamp "$name (timeout ${secs}s)"
  timeout --kill-after=10 "$secs" "$@"
  local rc=$?
  echo "$name rc=$rc" >> "$work/stages.txt"
  pack
  return $rc
}
want() { [[ " $stages " == *" $1 "* ]]; }

: > "$work/stages.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$work/gpu.txt"
nproc > "$work/cpus.txt"; grep -m1 "model name" /proc/cpuinfo >> "$work/cpus.txt"

# ---- binaries ---------------------------------------------------------------
bin=""
if [ -f .gpu-bundle/bundle.tar.xz ]; then
  rm -rf /tmp/gpu-bundle && mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf .gpu-bundle/bundle.tar.xz
  b=/tmp/gpu-bundle
  cp "$b/COMMIT" "$b/SHA256SUMS" "$work/" 2>/dev/null
  cuda_libs=$(dirname "$(ldconfig -p | awk '/libcublas\.so\.13 /{print $NF; exit}')" 2>/dev/null)
  [ -z "$cuda_libs" ] || [ "$cuda_libs" = . ] && cuda_libs=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH="$b/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The tests find their data under the source path they were built in.
  src=$(cat "$b/SOURCE_DIR" 2>/dev/null)
  if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; fi
  launch=()
  if ! "$b/bin/beacon-bench" --help > /dev/null 2>"$work/bundle-start.log"; then
    # Older C/C++ runtimes here than the binaries need: use the bundled ones through their own loader.
    launch=("$b/sys/ld-linux-x86-64.so.2" --library-path "$b/lib:$b/sys:$cuda_libs")
    "${launch[@]}" "$b/bin/beacon-bench" --help > /dev/null 2>>"$work/bundle-start.log" || launch=(false)
  fi
  if [ "${launch[*]}" != false ]; then
    bin="$b/bin"
    stamp "bundle: $(cat "$b/COMMIT" | head -1) ${launch:+(bundled loader)}; CUDA libraries from ${cuda_libs:-?}"
  else
    stamp "bundle does not start here: $(tail -2 "$work/bundle-start.log")"
  fi
fi
if [ -z "$bin" ]; then
  deps="$root/.gpu-deps/root/usr"
  if [ ! -d "$deps" ]; then
    echo "gpu-check: no usable .gpu-bundle and no .gpu-deps: run tools/gpu-bundle.sh (or tools/gpu-deps.sh) here" >&2
    exit 2
  fi
  export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  launch=()
  run configure 60 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBEACON_WITH_SERVING=OFF \
    -DCMAKE_PREFIX_PATH="$deps" -DBEACON_CPU_ARCH=native > "$work/configure.log" 2>&1 || { tail -40 "$work/configure.log"; exit 1; }
  run build 240 cmake --build build-gpu --target cuda_tests beacon-bench -j "${JOBS:-$(nproc)}" > "$work/build.log" 2>&1 ||
    { grep -E "error|Error" "$work/build.log" | head -40; exit 1; }
  bin="$root/build-gpu/bin"
fi
# "${launch[@]}" prefixes every binary: empty, or the bundled loader.
# The GPU machine's own python3 runs the Python tools: it holds PyTorch (the
# peer needs it), there is no .venv there, and the other tools need only the
# standard library. GPU_PYTHON overrides it.
gpu_python=${GPU_PYTHON:-python3}

# ---- stages -----------------------------------------------------------------
status=0
if want tests; then
  # FlashInfer's tests in a process of their own: a fault in a kernel never run on a GPU before would
  # end the CUDA context, and with it every test after it in the same process.
  run tests 150 "${launch[@]}" "$bin/cuda_tests" --gtest_filter='-*FlashInfer*' \
    --gtest_output="json:$work/cuda_tests.json" > "$work/cuda_tests.log" 2>&1 || status=1
  grep -E "^\[ *(FAILED|PASSED|SKIPPED) *\]|worst" "$work/cuda_tests.log" | tail -15
  run "tests flashinfer" 60 "${launch[@]}" "$bin/cuda_tests" --gtest_filter='*FlashInfer*' \
    --gtest_output="json:$work/cuda_tests_flashinfer.json" > "$work/cuda_tests_flashinfer.log" 2>&1 || status=1
  grep -E "^\[ *(FAILED|PASSED|SKIPPED) *\]|worst" "$work/cuda_tests_flashinfer.log" | tail -8
fi
# The server on the GPU before the kernel comparisons: it is one of issue 44's targets, and the
# deadline skips the stages that come last.
if want serve; then
  run serve 150 env LAUNCH="${launch[*]}" tools/gpu-serve-check.sh "$bin" "$work" || status=1
fi
for shape in $shapes; do
  cfg=${shape%%:*} ctx=${shape##*:}
  if want bench; then
    # shellcheck disable=SC2086
    run "bench $cfg" 150 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" --batches "$batches" \
      --context "$ctx" --steps 64 --kv-budget 2048 --pool-seqs 16 --prompt-len 256 --output-len 8192 \
      --throughput-steps 256 --json "$work/bench-$cfg.json" ${BENCH_ARGS:-} > "$work/bench-$cfg.log" 2>&1 || status=1
    tail -12 "$work/bench-$cfg.log"
  fi
  if want peer; then
    run "peer $cfg" 90 "$gpu_python" tools/gpu_torch_peer.py --config "configs/$cfg.json" --batches "$batches" \
      --context "$ctx" --steps 64 --json "$work/peer-$cfg.json" > "$work/peer-$cfg.log" 2>&1 || status=1
    cat "$work/peer-$cfg.log" | grep "torch peer"
  fi
  if want mma; then
    # Decode attention on tensor cores (--cuda-tensor-core-decode): the bench stage's decode and
    # throughput runs again, so the summary compares the two kernels and the peer from one run.
    # shellcheck disable=SC2086
    run "mma $cfg" 120 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" --batches "$batches" \
      --context "$ctx" --steps 64 --kv-budget 2048 --pool-seqs 16 --prompt-len 256 --output-len 8192 \
      --throughput-steps 256 --parts decode,throughput --cuda-tensor-core-decode --json "$work/mma-$cfg.json" \
      ${BENCH_ARGS:-} > "$work/mma-$cfg.log" 2>&1 || status=1
    tail -8 "$work/mma-$cfg.log"
  fi
  if want flashinfer; then
    # Decode attention by FlashInfer (--cuda-flashinfer-decode; docs/cuda.md), the same runs again, on
    # the shapes its decode covers (GQA groups 1-4, 6, 8, 16: Qwen3-4B's 4, not R1-Distill-Qwen-7B's 7).
    if "$gpu_python" -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(0 if c["num_attention_heads"] // c["num_key_value_heads"] in (1, 2, 3, 4, 6, 8, 16) else 1)' \
        "configs/$cfg.json"; then
      # shellcheck disable=SC2086
      run "flashinfer $cfg" 120 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" \
        --batches "$batches" --context "$ctx" --steps 64 --kv-budget 2048 --pool-seqs 16 --prompt-len 256 \
        --output-len 8192 --throughput-steps 256 --parts decode,throughput --cuda-flashinfer-decode \
        --json "$work/flashinfer-$cfg.json" ${BENCH_ARGS:-} > "$work/flashinfer-$cfg.log" 2>&1 || status=1
      tail -8 "$work/flashinfer-$cfg.log"
    else
      stamp "flashinfer $cfg: its GQA group is outside FlashInfer's decode dispatch; skipped"
    fi
  fi
  if want fitc; then
    # FlashInfer's tensor-core decode (its prefill kernel, one query a sequence; --cuda-flashinfer-decode
    # --cuda-tensor-core-decode), what vLLM and SGLang run at GQA groups of 4 and more: every shape.
    # shellcheck disable=SC2086
    run "fitc $cfg" 120 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" \
      --batches "$batches" --context "$ctx" --steps 64 --kv-budget 2048 --pool-seqs 16 --prompt-len 256 \
      --output-len 8192 --throughput-steps 256 --parts decode,throughput --cuda-flashinfer-decode \
      --cuda-tensor-core-decode --json "$work/fitc-$cfg.json" ${BENCH_ARGS:-} > "$work/fitc-$cfg.log" 2>&1 || status=1
    tail -8 "$work/fitc-$cfg.log"
  fi
done
if want profile; then
  cfg=${shapes%%:*}; cfg=${cfg%% *}; ctx=$(echo "$shapes" | awk '{print $1}'); ctx=${ctx##*:}
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$ncu_bin" ]; then
    run "profile $cfg" 150 "$ncu_bin" --profile-from-start off --clock-control none --cache-control none \
      --print-kernel-base function --print-units base --csv --page raw \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" --batches "$batches" \
      --context "$ctx" --steps 4 --kv-budget 2048 --parts decode,overhead --profile \
      --json "$work/profile-$cfg.json" > "$work/ncu-$cfg.csv" 2> "$work/ncu-$cfg.log" || status=1
    "$gpu_python" tools/ncu_summary.py "$work/ncu-$cfg.csv" "$work/profile-$cfg.json" --timed-json "$work/bench-$cfg.json" \
      --json "$work/phases-$cfg.json" > "$work/phases-$cfg.txt" 2>&1
    cat "$work/phases-$cfg.txt"; pack
  else
    stamp "no ncu on this machine: profile skipped"
  fi
fi
# Second pass over the shapes: the batch-1 projections and launch gaps, after the attention
# kernels and the profile (the deadline skips what comes last).
for shape in $shapes; do
  cfg=${shape%%:*} ctx=${shape##*:}
  if want gemv; then
    # Batch-1 decode with the projections on the matrix-vector kernel (--cuda-small-batch-gemv), against
    # the bench stage's cuBLAS at batch 1.
    run "gemv $cfg" 60 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" --batches 1 \
      --context "$ctx" --steps 64 --parts decode --cuda-small-batch-gemv --json "$work/gemv-$cfg.json" \
      > "$work/gemv-$cfg.log" 2>&1 || status=1
    tail -3 "$work/gemv-$cfg.log"
  fi
  if want pdl; then
    # Programmatic dependent launch of the step's own kernels (--cuda-programmatic-launch), with the
    # matrix-vector projections (which apply at batch <= 8): against the gemv stage at batch 1 and the
    # bench stage (cuBLAS, which PDL does not touch) at 16 and 64.
    run "pdl $cfg" 90 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" \
      --batches "$batches" --context "$ctx" --steps 64 --parts decode --cuda-programmatic-launch \
      --cuda-small-batch-gemv --json "$work/pdl-$cfg.json" > "$work/pdl-$cfg.log" 2>&1 || status=1
    tail -4 "$work/pdl-$cfg.log"
  fi
done
if want long; then
  # The paper's regime: 32K-token outputs at the R1-Distill-Qwen-7B shape, budget 2048, fixed pool.
  run "long 32K" 200 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/deepseek-r1-distill-qwen-7b.json" \
    --parts throughput --kv-budget 2048 --pool-seqs 16 --prompt-len 256 --output-len 32768 --throughput-steps 128 \
    --json "$work/long-32k.json" > "$work/long-32k.log" 2>&1 || status=1
  tail -5 "$work/long-32k.log"
fi
if want group; then
  # BeaconKV's overhead at batch 16 with its state per KV head (--kv-beacon-group-queries: a GQA group
  # fewer rows to observe, score and keep), against the per-head state of the bench stage.
  for shape in $shapes; do
    cfg=${shape%%:*}
    run "group $cfg" 60 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" \
      --parts overhead --kv-budget 2048 --steps 64 --kv-beacon-group-queries \
      --json "$work/group-$cfg.json" > "$work/group-$cfg.log" 2>&1 || status=1
    grep "BeaconKV overhead" "$work/group-$cfg.log"
  done
fi
if want score; then
  # BeaconKV's eviction scoring on CUDA cores (--no-cuda-tensor-core-score), against the tensor-core
  # scoring of the bench stage's overhead part (the default).
  for shape in $shapes; do
    cfg=${shape%%:*}
    run "score $cfg" 60 "${launch[@]}" "$bin/beacon-bench" cuda --model "dummy:$root/configs/$cfg.json" \
      --parts overhead --kv-budget 2048 --steps 64 --no-cuda-tensor-core-score \
      --json "$work/score-$cfg.json" > "$work/score-$cfg.log" 2>&1 || status=1
    grep "BeaconKV overhead" "$work/score-$cfg.log"
  done
fi
if want sanitize; then
  # compute-sanitizer over the kernels written since the last sanitizer run on hardware (2026-12-04):
  # tensor-core decode attention and eviction scoring, the GEMV, the deferred observation, the
  # programmatic launches; and memcheck over FlashInfer's kernels on our pages (an index past the
  # cache would be ours). memcheck:
  # out-of-bounds and misaligned accesses; racecheck: shared-memory hazards (a missing barrier),
  # which the emulator cannot see.
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
  filter='CudaBeaconScoreTest.*:CudaDecodeAttentionTest.TensorCore*:CudaDecodeGraphTest.*:CudaGemvTest.*:CudaBeaconObserveTest.*'
  if [ -n "$san" ]; then
    for tool in memcheck racecheck; do
      # memcheck also over the whole-model programmatic launches (racecheck would be too slow on them,
      # and its hazards are within a block, which PDL does not change).
      f=$filter; [ "$tool" = memcheck ] && f="$f:CudaBackendTest.Programmatic*:*FlashInferKernelTest.MatchesNaiveLoopOnRaggedBatches*"
      run "sanitize $tool" 120 "$san" --tool "$tool" --error-exitcode 3 "${launch[@]}" "$bin/cuda_tests" \
        --gtest_filter="$f" > "$work/sanitize-$tool.log" 2>&1 || status=1
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[ *(PASSED|FAILED) *\]" "$work/sanitize-$tool.log" | tail -4
    done
  else
    stamp "no compute-sanitizer on this machine: sanitize skipped"
  fi
fi
stamp "done"
pack

{
  echo "==================== gpu-check summary ===================="
  echo "GPU: $(cat "$work/gpu.txt")   host: $(tr '\n' ' ' < "$work/cpus.txt")"
  cat "$work/stages.txt"
  "$gpu_python" tools/gpu_check_summary.py "$work" 2>&1
} | tee "$out/summary.txt"
exit $status
