#!/usr/bin/env bash
# A local management cluster for users with Docker, as the seed describes: a kind cluster (node image
# pinned by digest in src/colony/versions.env) with the Docker socket mounted for the Cluster API
# Docker provider, the operator image built from this checkout and loaded into it, then
# hack/install-via-helm.sh (cert-manager, Cluster API + k0smotron + CAAPH, colony-operator).
#
# Usage: hack/start-dev-env.sh [VALUES.yaml ...]   (values of the colony-operator chart)
#
# Environment:
#   CLUSTER_NAME       kind cluster name (default: colony-dev); an existing one is reused
#   LOCAL_BUILD        1 (default): build the operator image and load it into kind; 0: use the
#                      chart's image from its registry
#   KIND               the kind to use (default: from PATH when it is the pinned version, else
#                      `go install sigs.k8s.io/kind@$KIND_VERSION` into the cache)
#   INFRA_PROVIDERS    passed on to install-via-helm.sh (default here: docker)
#
# Without Docker, `make dev` runs the same operator on a local control plane with fake GPU nodes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=../src/colony/versions.env
source "$root/src/colony/versions.env"

log() { printf '[start-dev-env] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

cluster="${CLUSTER_NAME:-colony-dev}"
cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"

command -v docker >/dev/null 2>&1 || die "docker is not installed (without Docker: make dev)"
docker info >/dev/null 2>&1 || die "the Docker daemon does not answer"

# kind at the pinned version.
kind="${KIND:-}"
if [[ -z "$kind" ]]; then
  if command -v kind >/dev/null 2>&1 && [[ "$(kind version -q 2>/dev/null)" == "${KIND_VERSION#v}" ]]; then
    kind="$(command -v kind)"
  else
    kind="$cache/kind-$KIND_VERSION/kind"
    if [[ ! -x "$kind" ]]; then
      command -v go >/dev/null 2>&1 || die "kind $KIND_VERSION is not installed and there is no go to install it"
      log "installing kind $KIND_VERSION into $(dirname "$kind")"
      GOBIN="$(dirname "$kind")" GOFLAGS=-mod=mod go install "sigs.k8s.io/kind@$KIND_VERSION"
    fi
  fi
fi

if "$kind" get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "reusing kind cluster $cluster"
else
  log "creating kind cluster $cluster ($KIND_NODE_IMAGE)"
  "$kind" create cluster --name "$cluster" --image "$KIND_NODE_IMAGE" --wait 5m --config - <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    # The Cluster API Docker provider creates the colony clusters' machines as sibling containers.
    extraMounts:
      - hostPath: /var/run/docker.sock
        containerPath: /var/run/docker.sock
EOF
fi
"$kind" export kubeconfig --name "$cluster" >/dev/null

values=()
if [[ "${LOCAL_BUILD:-1}" == 1 ]]; then
  image=colony-operator:dev
  log "building $image from $root"
  docker build --tag "$image" "$root"
  "$kind" load docker-image "$image" --name "$cluster"
  dev_values="$(mktemp)"
  trap 'rm -f "$dev_values"' EXIT
  printf 'image:\n  repository: colony-operator\n  tag: dev\n  pullPolicy: Never\n' >"$dev_values"
  values+=("$dev_values")
fi

INFRA_PROVIDERS="${INFRA_PROVIDERS:-docker}" "$here/install-via-helm.sh" "${values[@]}" "$@"
log "ready: kubectl --context kind-$cluster apply -f $root/examples/colony-docker-ray.yaml"
