#!/usr/bin/env bash
# Create the Python environment that runs real PyTorch DDP in the tests (tests/integration/
# test_real_ddp_run.py), at the torch version pinned in src/colony/versions.env, in a cache
# directory outside the repository:
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/torch-<TORCH_VERSION>-py<X.Y>/
#
# PyPI serves no CPU-only Linux wheel, so this is the CUDA-enabled one (about 3 GB of wheels,
# 5 GB installed); it runs on CPU with the gloo backend. Its own venv keeps the operator's
# environment small. Dependencies are pinned by hack/torch-requirements.lock (regenerate with
# `make torch-lock`). Reuses a complete environment; prints its directory on its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
versions="$(dirname "$here")/src/colony/versions.env"
# shellcheck source=../src/colony/versions.env
source "$versions"

python="${PYTHON:-python3}"
pyver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
# Keep in sync with colony.devenv.tools.torch_env_dir().
out="$cache/torch-$TORCH_VERSION-py$pyver"
if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi
log() { printf '[torch-venv] %s\n' "$*" >&2; }

start=$SECONDS
# Built in place; .complete is written last, so an interrupted build is redone from scratch.
rm -rf "$out"
"$python" -m venv "$out"
log "installing torch==$TORCH_VERSION into $out (about 3 GB download)"
constraints=()
[[ -f "$here/torch-requirements.lock" ]] && constraints=(-c "$here/torch-requirements.lock")
# --no-cache-dir: the wheels would double the disk use in pip's cache for no later gain.
"$out/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
  "${constraints[@]}" "torch==$TORCH_VERSION"
"$out/bin/python" -W ignore -c 'import torch.distributed as d; assert d.is_gloo_available(), "no gloo"'
touch "$out/.complete"
log "done in $((SECONDS - start)) s, $(du -sh "$out" | cut -f1) installed"
echo "$out"
