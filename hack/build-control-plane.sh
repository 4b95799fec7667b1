#!/usr/bin/env bash
# Build the local Kubernetes control plane from the Go module proxy, at the versions pinned in
# src/colony/versions.env, into a cache directory outside the repository:
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/bin/<versions>/{kube-apiserver,kube-scheduler,
#       kube-controller-manager,kubectl,etcd,kwok,helm,vc-scheduler}
#
# <versions> names the pinned versions, so a version change builds a fresh set. Binaries already present
# are reused; missing ones are rebuilt. Prints the binary directory on its last line.
#
# Arguments name a subset to build (etcd kwok helm kubernetes volcano), e.g. `... helm` for the
# image build; none: all of them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
versions="$(dirname "$here")/src/colony/versions.env"
# shellcheck source=../src/colony/versions.env
source "$versions"

cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
# Keep in sync with colony.devenv.tools.binary_dir().
bin="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION-volcano-$VOLCANO_VERSION"
work="$cache/build"
mkdir -p "$bin" "$work"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log() { printf '[build-control-plane] %s\n' "$*" >&2; }

have() { [[ -x "$bin/$1" ]]; }

build_kubernetes() {
  local targets=()
  for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    have "$c" || targets+=("$c")
  done
  [[ ${#targets[@]} -eq 0 ]] && return
  local dir="$work/k8s-$KUBERNETES_VERSION"
  mkdir -p "$dir"
  (
    cd "$dir"
    if [[ ! -f go.mod ]]; then
      go mod init local/k8sbuild >/dev/null 2>&1
      # Every staging module is required at v0.0.0 upstream; replace each by its published tag.
      local gomod
      gomod="$(cd / && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
      grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0\s*(//.*)?$' "$gomod" | awk '{print $1}' | sort -u |
        while read -r m; do go mod edit -replace="$m=$m@$KUBERNETES_STAGING_VERSION"; done
    fi
    local pkgs=()
    for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
      pkgs+=("k8s.io/kubernetes/cmd/$c@$KUBERNETES_VERSION")
    done
    go get "${pkgs[@]}"
    local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
    local ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    for c in "${targets[@]}"; do
      log "building $c $KUBERNETES_VERSION"
      go build -trimpath -ldflags "$ld" -o "$bin/$c.tmp" "k8s.io/kubernetes/cmd/$c"
      mv "$bin/$c.tmp" "$bin/$c"
    done
  )
}

build_etcd() {
  have etcd && return
  local dir="$work/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  (
    cd "$dir"
    [[ -f go.mod ]] || go mod init local/etcdbuild >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    log "building etcd $ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$bin/etcd.tmp" "$bin/etcd"
  )
}

build_kwok() {
  have kwok && return
  log "building kwok $KWOK_VERSION"
  GOBIN="$work/gobin-kwok" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mv "$work/gobin-kwok/kwok" "$bin/kwok"
}

build_helm() {
  have helm && return
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  log "building helm $HELM_VERSION"
  GOBIN="$work/gobin-helm" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$work/gobin-helm/helm" "$bin/helm"
}

have_go="$(go env GOVERSION)"
[[ "$have_go" == "$GO_TOOLCHAIN" ]] || log "warning: building with $have_go, pinned $GO_TOOLCHAIN (GOTOOLCHAIN=local: no download)"

build_volcano_scheduler() {
  have vc-scheduler && return
  local dir="$work/volcano-$VOLCANO_VERSION"
  mkdir -p "$dir"
  (
    cd "$dir"
    if [[ ! -f go.mod ]]; then
      go mod init local/volcanobuild >/dev/null 2>&1
      local gomod
      gomod="$(cd / && go mod download -json "volcano.sh/volcano@$VOLCANO_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
      # Volcano's own replaces (k8s staging modules at published tags, a few pins), except its local
      # staging path for volcano.sh/apis.
      awk '/^replace \(/{f=1;next} f&&/^\)/{f=0} f && $2=="=>" && $3!~/^\./ {print $1"="$3"@"$4}' "$gomod" |
        while read -r r; do go mod edit -replace="$r"; done
      # The proxy serves volcano.sh/apis v1.14.0 but not v1.15.x: overlay the one constant v1.15 adds.
      cp -r "$(cd / && go mod download -json "volcano.sh/apis@$VOLCANO_APIS_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')" apis
      chmod -R u+w apis
      cp "$here/volcano/zz_v1_15_compat.go" apis/pkg/apis/scheduling/v1beta1/
      go mod edit -replace=volcano.sh/apis=./apis
    fi
    # No `go mod tidy`: without .go files of its own it would drop the requirement.
    go get "volcano.sh/volcano/cmd/scheduler@$VOLCANO_VERSION"
    log "building vc-scheduler $VOLCANO_VERSION"
    go build -trimpath -ldflags "-s -w -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION" \
      -o "$bin/vc-scheduler.tmp" volcano.sh/volcano/cmd/scheduler
    mv "$bin/vc-scheduler.tmp" "$bin/vc-scheduler"
  )
}

wanted=" $* "
want() { [[ "$wanted" == "  " || "$wanted" == *" $1 "* ]]; }
start=$SECONDS
want etcd && build_etcd
want kwok && build_kwok
want helm && build_helm
want kubernetes && build_kubernetes
want volcano && build_volcano_scheduler
log "binaries ready in $bin ($((SECONDS - start))s)"
echo "$bin"
