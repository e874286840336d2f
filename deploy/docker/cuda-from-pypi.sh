#!/usr/bin/env bash
# Installs the CUDA toolkit parts the CUDA build needs (nvcc, the CUDA runtime
# with its static library, CCCL, cuBLAS) from NVIDIA's PyPI wheels into one
# toolkit-shaped directory (bin/ include/ lib/ lib64 nvvm/), where CMake's
# CUDA language support and FindCUDAToolkit find them as they find a runfile
# install. The CUDA image (Dockerfile.cuda) uses this because PyPI is reachable
# wherever the project builds, NVIDIA's apt repository is not (docs/deploy.md).
#   deploy/docker/cuda-from-pypi.sh PYTHON PREFIX [CUDA_MINOR]
#   deploy/docker/cuda-from-pypi.sh .venv/bin/python /usr/local/cuda 13.0
set -euo pipefail
py=${1:?python with pip}; prefix=${2:?install prefix}; ver=${3:-13.0}
# nvcc's own parts (cicc lives in nvidia-nvvm, the crt headers in nvidia-cuda-crt since CUDA 13).
wheels=("nvidia-cuda-nvcc==$ver.*" "nvidia-nvvm==$ver.*" "nvidia-cuda-crt==$ver.*"
        "nvidia-cuda-runtime==$ver.*" "nvidia-cuda-cccl==$ver.*" "nvidia-cublas==$ver.*")
major=${ver%%.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "[cuda-from-pypi] pip download ${wheels[*]}"
"$py" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" "${wheels[@]}"
mkdir -p "$prefix"
for w in "$tmp"/*.whl; do
  "$py" -m zipfile -e "$w" "$tmp/unpacked"
done
cp -a "$tmp/unpacked/nvidia/cu$major/." "$prefix/"
chmod +x "$prefix"/bin/* "$prefix"/nvvm/bin/* 2>/dev/null || true
# The wheels ship only versioned sonames; the linker wants the plain names, and
# nvcc.profile looks in lib64 (what a runfile install calls lib).
for so in "$prefix"/lib/lib*.so.*; do
  base=${so%%.so.*}.so
  [ -e "$base" ] || ln -s "$(basename "$so")" "$base"
done
[ -e "$prefix/lib64" ] || ln -s lib "$prefix/lib64"
"$prefix/bin/nvcc" --version | tail -2
