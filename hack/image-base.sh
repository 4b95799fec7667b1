#!/usr/bin/env bash
# A pinned Python base image made from Debian packages, for hosts that cannot pull the Dockerfile's
# default `python:*-slim` image: mmdebstrap builds a minimal root filesystem of the Debian release
# pinned in src/colony/versions.env (IMAGE_DEBIAN_SUITE) with its python3, buildah imports it.
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/image-base/<key>/{rootfs.tar,packages.txt}
#   image localhost/colony-operator-base:<suite>-<key>
#
# <key> hashes this script and the pins, so a change makes a new base. A missing tarball is rebuilt,
# a tarball not yet imported is imported. packages.txt lists every package=version in the base.
# Prints the image name on its last line. Environment: DEBIAN_MIRROR (default deb.debian.org).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../src/colony/versions.env
source "$root/src/colony/versions.env"
suite="$IMAGE_DEBIAN_SUITE"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
# python3 of the release and what a Python service needs at run time; nothing to build with.
packages="python3,ca-certificates,netbase,tzdata"

key="$({ cat "${BASH_SOURCE[0]}"; echo "$suite $packages $mirror $security"; } | sha256sum | cut -c1-12)"
cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}/image-base/$key"
image="localhost/colony-operator-base:$suite-$key"
log() { printf '[image-base] %s\n' "$*" >&2; }

if [[ ! -f "$cache/rootfs.tar" ]]; then
  start=$SECONDS
  mkdir -p "$cache"
  log "building a $suite root filesystem with $packages (mmdebstrap)"
  # Slim like the official python images: no documentation but copyright files, no man pages or
  # translations. Check-Valid-Until off: mirrors that serve a dated snapshot still work.
  mmdebstrap --quiet --variant=minbase --format=tar --include="$packages" \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook="chroot \"\$1\" dpkg-query -W -f '\${Package}=\${Version}\n' > '$cache/packages.txt'" \
    "$suite" "$cache/rootfs.tar.tmp" \
    "deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security $suite-security main" >&2
  mv "$cache/rootfs.tar.tmp" "$cache/rootfs.tar"
  buildah rmi "$image" >/dev/null 2>&1 || true
  log "root filesystem ready in $((SECONDS - start)) s: $(grep -E '^python3(\.[0-9]+)?=' "$cache/packages.txt" | tr '\n' ' ')"
fi

if ! buildah inspect --type image "$image" >/dev/null 2>&1; then
  log "importing $cache/rootfs.tar as $image"
  ctr="$(buildah from --quiet scratch)"
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  buildah add --quiet "$ctr" "$cache/rootfs.tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd python3 --label "org.opencontainers.image.base.name=debian:$suite (mmdebstrap)" "$ctr"
  buildah commit --quiet --rm "$ctr" "$image" >/dev/null
  trap - EXIT
fi
echo "$image"
