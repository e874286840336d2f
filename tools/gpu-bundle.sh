#!/usr/bin/env bash
# Builds, on this (Debian 12) machine, every binary the GPU machine runs, and
# packs them with the shared libraries they need into one archive the device
# tool carries (issue 44):
#
#   tools/gpu-bundle.sh        # here: .gpu-bundle/bundle.tar.xz (git-ignored)
#   tools/gpu-check.sh         # there, with carry [".gpu-bundle"]
#
# Why build here: the GPU machine has CUDA, CMake and a compiler but none of
# the Debian -dev packages the server needs (gRPC, protobuf, prometheus-cpp,
# Boost), and no network. CUDA 13 here compiles the same sm_90 code the H200
# runs. The build is portable on the host side (-march=x86-64-v3, not the
# native -march of `make build`), since the GPU machine's CPU is not this one.
#
# What travels: cuda_tests, beacon-bench, beacon-serve, beacon-loadtest
# (stripped) in bin/; in lib/ every shared library ldd names except the CUDA
# driver and toolkit (libcuda, libcublas*, libcudart: the GPU machine has its
# own CUDA 13.0) and glibc; in sys/ glibc, libstdc++ and libgcc_s with this
# machine's loader, for tools/gpu-check.sh's fallback when the GPU machine's
# own C and C++ runtimes are older than these binaries need. xz keeps the
# archive far under the tool's 64 MiB (the tracked tree is about 32 MiB).
#
# Environment: BUILD_DIR (default build-gpu-bundle), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD_DIR:-build-gpu-bundle}
jobs=${JOBS:-$(nproc)}
out=.gpu-bundle
bins=(cuda_tests beacon-bench beacon-serve beacon-loadtest)

command -v nvcc >/dev/null || { echo "gpu-bundle: no nvcc on PATH (the CUDA build needs it)" >&2; exit 2; }
tools/bootstrap.sh run >/dev/null
grep -qxF "/$out/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo "/$out/" >> .git/info/exclude; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBEACON_CPU_ARCH=x86-64-v3 -DBEACON_CUDA_EMU=OFF \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" >/dev/null
fi
cmake --build "$build" --target "${bins[@]}" -j "$jobs"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/sys"
for b in "${bins[@]}"; do
  cp "$build/bin/$b" "$stage/bin/"
  strip "$stage/bin/$b"
done
for b in "${bins[@]}"; do ldd "$build/bin/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    case $(basename "$lib") in
      libcuda.so* | libcublas* | libcudart* | libnvidia*) ;;  # the GPU machine's CUDA 13.0
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libstdc++.so.* | libgcc_s.so.*)
        cp -L "$lib" "$stage/sys/" ;;
      *) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/sys/"
git rev-parse HEAD > "$stage/COMMIT"
echo "$root" > "$stage/SOURCE_DIR"  # cuda_tests read tests/data under the path they were built in
git status --porcelain --untracked-files=no | grep -q . && echo "(with uncommitted changes)" >> "$stage/COMMIT"
(cd "$stage/bin" && sha256sum "${bins[@]}") > "$stage/SHA256SUMS"
mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" .
echo "gpu-bundle: $(du -h "$out/bundle.tar.xz" | cut -f1) in $out/bundle.tar.xz ($(du -sh "$stage" | cut -f1) unpacked:" \
  "$(ls "$stage/lib" | wc -l) libraries; commit $(head -c 12 "$stage/COMMIT"))"
