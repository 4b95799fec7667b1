#!/usr/bin/env bash
# Build the operator image from the Dockerfile without Docker: buildah with --isolation chroot (no
# daemon, no user namespaces), installed by hack/install-image-tools.sh when missing.
#
#   IMAGE         tag to build (default colony-operator:dev, stored as localhost/colony-operator:dev)
#   PYTHON_IMAGE  base image, used as given (no fallback). Unset: the official python image pinned
#                 in src/colony/versions.env (PYTHON_IMAGE there), when it is in local storage or
#                 can be pulled within IMAGE_PULL_TIMEOUT seconds (default 60); otherwise the Debian
#                 base of hack/image-base.sh (cached), since a registry is not reachable everywhere.
#                 The log says which base was used, and why.
#   IMAGE_BASE    auto (default: as above), official (the pinned python image; fail if it cannot be
#                 pulled) or debian (the Debian base, no pull attempted)
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

# qualified NAME: NAME with its registry (docker.io/library/ for Docker Hub's short names), so that
# buildah needs no short-name aliases.
qualified() {
  local first="${1%%/*}"
  if [[ "$1" != */* ]]; then
    printf 'docker.io/library/%s\n' "$1"
  elif [[ "$first" != *.* && "$first" != *:* && "$first" != localhost ]]; then
    printf 'docker.io/%s\n' "$1"
  else
    printf '%s\n' "$1"
  fi
}

# official_base: the pinned official python image, from local storage or pulled; fails (after
# logging why) when it can be neither.
official_base() {
  local name err rc=0
  name="$(qualified "$PYTHON_IMAGE")"
  if buildah inspect --type image "$name" >/dev/null 2>&1; then
    log "base: $name (official python image, already in local storage)"
  else
    log "pulling $name (timeout ${pull_timeout} s)"
    err="$(timeout "$pull_timeout" buildah pull --quiet "docker://$name" 2>&1 >/dev/null)" || rc=$?
    if ((rc == 124)); then
      log "could not pull $name: timed out after ${pull_timeout} s"
      return 1
    elif ((rc != 0)); then
      log "could not pull $name: $(tail -n 1 <<<"${err:-exit status $rc}")"
      return 1
    fi
    log "base: $name (official python image, pulled)"
  fi
  printf '%s\n' "$name"
}

args=(--isolation chroot --network host --layers --tag "$image" --file "$root/Dockerfile")
pull_timeout="${IMAGE_PULL_TIMEOUT:-60}"
mode="${IMAGE_BASE:-auto}"
base="$requested_base"
if [[ -n "$base" ]]; then
  log "base: $base (PYTHON_IMAGE)"
else
  case "$mode" in
    auto | official)
      if ! base="$(official_base)"; then
        [[ "$mode" == auto ]] || { log "error: IMAGE_BASE=official and no official base"; exit 1; }
        base=""
        log "falling back to the Debian base of hack/image-base.sh"
      fi
      ;;
    debian) log "IMAGE_BASE=debian: not trying the official python image" ;;
    *) log "error: IMAGE_BASE must be auto, official or debian, not $mode" && exit 1 ;;
  esac
  if [[ -z "$base" ]]; then
    base="$(bash "$root/hack/image-base.sh")"
    log "base: $base (Debian $IMAGE_DEBIAN_SUITE packages, mmdebstrap)"
    # Debian's python3 keeps its headers and ensurepip in separate packages.
    args+=(--build-arg "BUILD_PACKAGES=gcc libc6-dev python3-dev python3-venv")
  fi
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
log "built $image on $base in $((SECONDS - start)) s; size $size (uncompressed)"
echo "localhost/${image#localhost/}"
