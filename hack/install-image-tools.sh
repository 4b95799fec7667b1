#!/usr/bin/env bash
# Install the daemonless image tools `make image` uses, from Debian's packages when missing:
# buildah (builds the Dockerfile and runs the image with --isolation chroot: no daemon, no user
# namespaces) and mmdebstrap (makes the base root filesystem from Debian packages).
# Needs root (apt-get); prints nothing on success when both are present already.
set -euo pipefail

log() { printf '[install-image-tools] %s\n' "$*" >&2; }

missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  log "missing: ${missing[*]}; install them with your package manager (Debian/Ubuntu: apt-get install ${missing[*]})"
  exit 1
fi
log "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# Without recommends: crun/runc and fuse-overlayfs are not needed with --isolation chroot and
# native overlay storage.
command -v buildah >/dev/null && command -v mmdebstrap >/dev/null
