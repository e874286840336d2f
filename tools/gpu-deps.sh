#!/usr/bin/env bash
# Prepares, on this (Debian) machine, the C++ development packages the GPU
# machine lacks, for tools/gpu-check.sh to build against: the GPU machine has
# CUDA, CMake, Ninja and a compiler but no Debian -dev packages and no
# network. Downloads the .deb files (apt-get download: no install, no root
# needed beyond apt's cache) and unpacks them into .gpu-deps/root, a folder
# git ignores (.git/info/exclude) that the device tool carries.
#
#   tools/gpu-deps.sh            # then: device run, carry [".gpu-deps"]
#
# What is fetched: abseil (headers, CMake config, shared libraries),
# GoogleTest/GoogleMock (static libraries + CMake config), nlohmann-json
# (headers). Nothing here touches the system's own packages.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-deps
pkgs=(libabsl-dev libabsl20220623 libgtest-dev libgmock-dev googletest nlohmann-json3-dev libssl-dev libssl3)
grep -qxF "/$out/" .git/info/exclude 2>/dev/null || echo "/$out/" >> .git/info/exclude
rm -rf "$out"
mkdir -p "$out/debs" "$out/root"
(cd "$out/debs" && apt-get download "${pkgs[@]}" >/dev/null)
for deb in "$out"/debs/*.deb; do dpkg-deb -x "$deb" "$out/root"; done
# GoogleTest's sources (package googletest) are not needed: the -dev
# packages carry the built static libraries.
rm -rf "$out/root/usr/src" "$out/root/usr/share/doc" "$out/debs"
du -sh "$out" | awk '{print "gpu-deps: " $1 " in .gpu-deps/root (carry it with the device tool)"}'
