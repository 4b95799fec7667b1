#!/usr/bin/env bash
# Build Kueue's scheduler performance harness (bench/kueue_admission.py runs it side by side with
# our operator) from the Go module proxy, at KUEUE_VERSION pinned in src/colony/versions.env, into
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/kueue/<KUEUE_VERSION>/
#       bin/minimalkueue   Kueue's core controllers and scheduler only (test/performance/scheduler)
#       bin/runner         its generator + runner (finishes workloads after runtimeMs) + recorder
#       crds/*.yaml        Kueue's CRDs (config/components/crd/bases)
#       configs/           the harness's generator and rangespec configs (baseline, tas)
#       build-seconds      how long the cold build took
#
# A complete directory is reused; anything missing is rebuilt. Prints the directory on its last line.
# `go install pkg@version` would refuse a module with replace directives, so the module zip is
# downloaded and the binaries are built inside it (with its own go.mod and go.sum).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=../src/colony/versions.env
source "$root/src/colony/versions.env"

cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
out="$cache/kueue/$KUEUE_VERSION"
harness="test/performance/scheduler"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log() { printf '[build-kueue] %s\n' "$*" >&2; }

complete() {
  [[ -x "$out/bin/minimalkueue" && -x "$out/bin/runner" && -d "$out/crds" && -d "$out/configs" ]]
}

if complete; then
  echo "$out"
  exit 0
fi

start=$SECONDS
mkdir -p "$out/bin"
module="$(cd / && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
[[ -n "$module" && -d "$module" ]] || { log "sigs.k8s.io/kueue@$KUEUE_VERSION not served"; exit 1; }

# The module cache is read-only: build in a writable copy so `go build` may update go.sum.
src="$cache/build/kueue-$KUEUE_VERSION"
if [[ ! -f "$src/go.mod" ]]; then
  rm -rf "$src.partial"
  cp -r "$module" "$src.partial"
  chmod -R u+w "$src.partial"
  mv "$src.partial" "$src"
fi

for target in minimalkueue runner; do
  [[ -x "$out/bin/$target" ]] && continue
  log "building $target $KUEUE_VERSION"
  (cd "$src" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$out/bin/$target.tmp" "./$harness/$target")
  mv "$out/bin/$target.tmp" "$out/bin/$target"
done

rm -rf "$out/crds" "$out/configs"
cp -r "$src/config/components/crd/bases" "$out/crds.partial"
mv "$out/crds.partial" "$out/crds"
cp -r "$src/$harness/configs" "$out/configs.partial"
mv "$out/configs.partial" "$out/configs"
chmod -R u+w "$out/crds" "$out/configs"
echo "$((SECONDS - start))" > "$out/build-seconds"
log "kueue $KUEUE_VERSION harness ready in $out ($((SECONDS - start))s)"
echo "$out"
