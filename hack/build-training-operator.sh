#!/usr/bin/env bash
# Build Kubeflow training-operator (v1: PyTorchJob and friends) from the Go module proxy, at the
# version pinned in src/colony/versions.env, into the cache directory outside the repository:
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/bin/training-operator-<version>/training-operator
#
# Only bench/launch_throughput.py uses it (the baseline of the launch benchmark). A binary already
# present is reused; a missing one is rebuilt. Prints the binary's path on its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
versions="$(dirname "$here")/src/colony/versions.env"
# shellcheck source=../src/colony/versions.env
source "$versions"

cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
bin="$cache/bin/training-operator-$KUBEFLOW_TRAINING_OPERATOR_VERSION"
work="$cache/build"
binary="$bin/training-operator"
mkdir -p "$bin" "$work"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log() { printf '[build-training-operator] %s\n' "$*" >&2; }

have_go="$(go env GOVERSION)"
[[ "$have_go" == "$GO_TOOLCHAIN" ]] || log "warning: building with $have_go, pinned $GO_TOOLCHAIN (GOTOOLCHAIN=local: no download)"

if [[ ! -x "$binary" ]]; then
  start=$SECONDS
  log "building training-operator $KUBEFLOW_TRAINING_OPERATOR_VERSION"
  # The module has no replace directives, so `go install module@version` builds it as released.
  GOBIN="$work/gobin-training-operator" go install -trimpath -ldflags "-s -w" \
    "github.com/kubeflow/training-operator/cmd/training-operator.v1@$KUBEFLOW_TRAINING_OPERATOR_VERSION"
  mv "$work/gobin-training-operator/training-operator.v1" "$binary"
  log "built in $((SECONDS - start))s"
fi
echo "$binary"
