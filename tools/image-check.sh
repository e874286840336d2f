#!/usr/bin/env bash
# Builds the container images for real and runs the CPU one: no Docker daemon,
# no registry. Debian's podman builds the Dockerfiles (chroot isolation), the
# Debian 12 base image is made from the Debian archive with debootstrap, and
# the CPU image is started with the default model mounted and checked from
# outside by tools/image_smoke.py (gRPC, OpenAI chat, /metrics, /ready, a
# SIGTERM drain). Results and timings: docs/deploy.md ("Images, built here").
#
#   tools/image-check.sh              # base image if missing, CPU image, run and check it
#   tools/image-check.sh --cuda       # the CUDA image instead (built, not run: no GPU here)
#   tools/image-check.sh --cpu --cuda # both
#   tools/image-check.sh --build-only # the CPU image only (`make image`)
#   tools/image-check.sh --run-only   # run and check the CPU image already built
#
# Needs root (podman, debootstrap), `make deps` (.venv for the smoke client)
# and `make model`. Installs podman, runc and debootstrap from Debian when
# missing. Slow (the image builds the whole tree: tens of minutes on two
# cores), so CI does not run it; tests/deploy/test_docker.py checks the
# Dockerfiles' text in CI.
#
# Environment: IMAGE_TAG (default beacon-serve), HTTP_PORT/GRPC_PORT/ADMIN_PORT
# (loopback ports to publish, default 18080/15051/18081). The images are kept (podman images).
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=0; cuda=0; run=1; build=1
for arg in "$@"; do
  case "$arg" in
    --cpu) cpu=1 ;;
    --cuda) cuda=1 ;;
    --build-only) run=0 ;;
    --run-only) build=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "image-check: unknown argument $arg (--cpu, --cuda, --build-only, --run-only)" >&2; exit 2 ;;
  esac
done
[ $cuda = 1 ] || cpu=1
[ $cpu = 1 ] || run=0  # only the CPU image runs here
tag=${IMAGE_TAG:-beacon-serve}
base=docker.io/library/debian:bookworm-slim
http_port=${HTTP_PORT:-18080}
grpc_port=${GRPC_PORT:-15051}
admin_port=${ADMIN_PORT:-18081}
log() { echo "[image-check] $*"; }
now() { date +%s; }

[ "$(id -u)" = 0 ] || { echo "image-check: needs root (podman with chroot isolation, debootstrap)" >&2; exit 1; }
if [ $run = 1 ]; then
  [ -f models/default.gguf ] || { echo "image-check: models/default.gguf missing; run \`make model\`" >&2; exit 1; }
  [ -x .venv/bin/python ] || { echo "image-check: .venv missing; run \`make deps\`" >&2; exit 1; }
fi
missing=()
for p in podman runc debootstrap; do command -v "$p" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- The Debian 12 base, from the Debian archive (no registry is reachable) --------
# Named as the Dockerfiles' FROM, so podman uses it instead of pulling. minbase is
# close to debian:bookworm-slim (apt, dpkg, bash, coreutils); the sources list is
# the official image's (bookworm, -updates, -security).
if ! podman image exists "$base"; then
  t0=$(now)
  root=$(mktemp -d /tmp/bookworm-rootfs.XXXXXX)
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  log "debootstrap --variant=minbase bookworm ($mirror)"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  printf '%s\n' "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb ${mirror%/debian}/debian-security bookworm-security main" > "$root/etc/apt/sources.list"
  tar -C "$root" -c . | podman import --change 'CMD ["bash"]' - "$base" >/dev/null
  rm -rf "$root"
  log "base $base: $(( $(now) - t0 )) s"
fi

# Where the host reaches PyPI through a TLS-intercepting proxy, its pip trusts an extra CA
# (PIP_CERT or pip's `cert` setting): the build's pip gets the same bundle, mounted read-only.
ca_args=()
host_cert=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
if [ -n "$host_cert" ] && [ -f "$host_cert" ]; then
  ca_args=(--volume "$host_cert:/run/build-ca.crt:ro" --build-arg PIP_CERT=/run/build-ca.crt)
  log "pip in the build trusts the host's CA bundle $host_cert"
fi

build() {  # build DOCKERFILE TAG
  local t0; t0=$(now)
  log "podman build -f $1 -t $2 (chroot isolation)"
  # Each log line stamped with the time, so the steps' durations can be read off.
  podman build --isolation chroot --network host "${ca_args[@]}" -f "$1" -t "$2" . 2>&1 |
    while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done > "build/image-$(basename "$1").log" || {
    tail -40 "build/image-$(basename "$1").log"; echo "image-check: $1 did not build" >&2; exit 1; }
  log "$2 built in $(( $(now) - t0 )) s, $(podman image inspect --format '{{.Size}}' "$2" | numfmt --to=iec) " \
      "(log build/image-$(basename "$1").log)"
}
mkdir -p build
if [ $build = 1 ]; then
  if [ $cpu = 1 ]; then build deploy/docker/Dockerfile "$tag:cpu"; fi
  if [ $cuda = 1 ]; then build deploy/docker/Dockerfile.cuda "$tag:cuda"; fi
fi
[ $run = 1 ] || exit 0

# ---- Run the CPU image and check it from outside ----------------------------------
# podman's default runtime, crun, cannot start containers on this kind of machine:
# it sets RLIMIT_NOFILE to 1048576 above the hard limit (no CAP_SYS_RESOURCE) and
# refuses hybrid cgroups. runc with the limits kept at the host's runs it.
name=beacon-image-check-$$
nofile=$(ulimit -Hn)
podman rm -f "$name" >/dev/null 2>&1 || true
log "podman run $tag:cpu (runc, -p 127.0.0.1:$http_port:8080 -p 127.0.0.1:$grpc_port:50051 -p 127.0.0.1:$admin_port:8081, models/ mounted)"
podman run -d --name "$name" --runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 \
  -p "127.0.0.1:$http_port:8080" -p "127.0.0.1:$grpc_port:50051" -p "127.0.0.1:$admin_port:8081" \
  -v "$PWD/models:/models:ro" \
  -e BEACON_DRAIN_DELAY_S=2 -e BEACON_THREADS=2 "$tag:cpu" >/dev/null
trap 'podman logs "$name" > build/image-run.log 2>&1 || true; podman rm -f "$name" >/dev/null 2>&1 || true' EXIT
if .venv/bin/python tools/image_smoke.py --http "$http_port" --grpc "$grpc_port" --admin "$admin_port" \
  --container "$name"; then
  log "CPU image: every check passed"
else
  podman logs "$name" 2>&1 | tail -30
  echo "image-check: the CPU image failed a check (server log: build/image-run.log)" >&2
  exit 1
fi
