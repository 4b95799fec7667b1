#!/usr/bin/env bash
# Build the package with its scheduler core compiled by mypyc (setup.py, COLONY_COMPILE=1) and
# unpack the wheel into a cache directory outside the repository:
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/compiled-<hash of the sources>/
#
# Putting that directory first on PYTHONPATH runs the compiled scheduler with the dependencies of
# the project's venv (`make bench` and the compiled-core tests do this; the image installs the same
# wheel). Reuses a build of identical sources; prints its directory on its last line.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
# Tracked and untracked (not ignored) sources that exist: a working tree with uncommitted changes
# gets its own build.
hash="$(cd "$root" && git ls-files -co --exclude-standard src | sort | while read -r f; do [ -f "$f" ] && cat "$f"; done \
  | cat setup.py pyproject.toml hack/build-compiled.sh - | sha256sum | cut -c1-16)"
out="$cache/compiled-$hash"
if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi
log() { printf '[build-compiled] %s\n' "$*" >&2; }

start=$SECONDS
rm -rf "$out" "$out.wheel"
log "compiling the scheduler core with mypyc into $out"
# From a clean copy of the sources, as the image does: pip builds in the source tree, and a stale
# setuptools build/ directory there (left by an earlier build) would put modules compiled from
# older sources into this wheel.
sources="$(mktemp -d)"
trap 'rm -rf "$sources"' EXIT
(cd "$root" && git ls-files -co --exclude-standard -z pyproject.toml setup.py README.md src \
  | xargs -0 -I{} sh -c '[ -f "$1" ] && cp --parents "$1" "$0"' "$sources" {})
COLONY_COMPILE=1 "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
  --wheel-dir "$out.wheel" "$sources" >&2
"$python" -m zipfile -e "$out.wheel"/colony_operator-*.whl "$out"
# the venv has the project installed already: its metadata here would be a second copy
rm -rf "$out.wheel" "$out"/*.dist-info
# older builds of other sources are of no further use
find "$cache" -maxdepth 1 -name 'compiled-*' ! -name "compiled-$hash" -exec rm -rf {} +
touch "$out/.complete"
log "done in $((SECONDS - start)) s"
echo "$out"
