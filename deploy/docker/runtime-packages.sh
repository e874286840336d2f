#!/usr/bin/env bash
# Prints, one a line, the Debian packages that hold the shared libraries the
# given binaries load (ldd + dpkg-query -S). The image build runs it on the
# binaries it has just built, and the runtime stage installs exactly these:
# no second list to keep in step with tools/bootstrap.sh by hand.
#   deploy/docker/runtime-packages.sh build/bin/beacon-serve build/bin/beacon-client
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
listing=$(ldd "$@")
if grep -q "not found" <<<"$listing"; then
  echo "runtime-packages: unresolved libraries:" >&2
  grep "not found" <<<"$listing" >&2
  exit 1
fi
mapfile -t libs < <(awk '/=> \// {print $3}' <<<"$listing" | sort -u)
# Debian 12 merges /lib into /usr/lib: dpkg knows one of the spellings of each.
candidates=()
for lib in "${libs[@]}"; do
  candidates+=("$lib" "/usr${lib}" "${lib#/usr}" "$(readlink -f "$lib")")
done
# One dpkg-query for all ("package[:arch]: path" lines; unknown paths are skipped).
owners=$(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
for lib in "${libs[@]}"; do
  pkg=""
  for path in "$lib" "/usr${lib}" "${lib#/usr}" "$(readlink -f "$lib")"; do
    pkg=$(awk -v p="$path" -F': ' '$2 == p {sub(/:.*/, "", $1); print $1; exit}' <<<"$owners")
    [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    # A CUDA toolkit installed without dpkg (a runfile or tarball, as on the
    # CI machines) owns cuBLAS there; in the CUDA image NVIDIA's Debian
    # packages own it and the lookup above finds them.
    case "$(readlink -f "$lib")" in
      /usr/local/cuda*) echo "runtime-packages: $lib belongs to a CUDA toolkit no package owns; skipped" >&2
                        continue ;;
    esac
    echo "runtime-packages: no Debian package holds $lib" >&2
    exit 1
  fi
  echo "$pkg"
done | sort -u
