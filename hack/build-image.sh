#!/usr/bin/env bash
# Build the operator image from the Dockerfile without Docker: buildah with --isolation chroot (no
# daemon, no user namespaces), installed by hack/install-image-tools.sh when missing.
#
#   IMAGE         tag to build (default colony-operator:dev, stored as localhost/colony-operator:dev)
#   PYTHON_IMAGE  base image; default: the Debian base of hack/image-base.sh (cached), since the
#                 official python image cannot be pulled everywhere. Set it to
#                 python:3.11.14-slim-bookworm (versions.env) where a registry is reachable.
#   CA_BUNDLE     CA bundle mounted (read-only, never copied into the image) for pip and apt in the
#                 build stage; default: the host's /etc/ssl/certs/ca-certificates.crt, so a
#                 TLS-intercepting proxy the host trusts works in the build too.
#
# helm (add-ons on existing clusters) is the pinned binary of hack/build-control-plane.sh, handed to
# the Dockerfile's `helm` stage as a build context. Layers are cached (--layers): an unchanged
# rebuild takes seconds. Prints the image name on its last line; the size goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requested_base="${PYTHON_IMAGE:-}"  # versions.env below sets PYTHON_IMAGE too
# shellcheck source=../src/colony/versions.env
source "$root/src/colony/versions.env"
image="${IMAGE:-colony-operator:dev}"
cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
log() { printf '[build-image] %s\n' "$*" >&2; }

bash "$root/hack/install-image-tools.sh"
start=$SECONDS

args=(--isolation chroot --network host --layers --tag "$image" --file "$root/Dockerfile")
base="$requested_base"
if [[ -z "$base" ]]; then
  base="$(bash "$root/hack/image-base.sh")"
  # Debian's python3 keeps its headers and ensurepip in separate packages.
  args+=(--build-arg "BUILD_PACKAGES=gcc libc6-dev python3-dev python3-venv")
fi
args+=(--build-arg "PYTHON_IMAGE=$base")

helm_bin="$(bash "$root/hack/build-control-plane.sh" helm)/helm"
helm_ctx="$cache/image/helm-$HELM_VERSION"
if ! cmp -s "$helm_bin" "$helm_ctx/helm"; then
  mkdir -p "$helm_ctx"
  cp "$helm_bin" "$helm_ctx/helm.tmp" && mv "$helm_ctx/helm.tmp" "$helm_ctx/helm"
fi
args+=(--build-context "helm=$helm_ctx")

ca="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
if [[ -f "$ca" ]]; then
  args+=(--volume "$ca:/etc/ssl/certs/ca-certificates.crt:ro" --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
fi

log "building $image on $base"
buildah build "${args[@]}" "$root" >&2
size="$(buildah images --format '{{.Size}}' --filter "reference=$image" | head -1)"
log "built $image in $((SECONDS - start)) s; size $size (uncompressed)"
echo "localhost/${image#localhost/}"
