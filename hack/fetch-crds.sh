#!/usr/bin/env bash
# Download the upstream CRD YAML that colony-operator renders against, at the versions pinned in
# src/colony/versions.env, from the Go module zips (`go mod download`), into
#
#   ${COLONY_CACHE_DIR:-~/.cache/colony-operator}/crds/<key>/<component>/*.yaml
#
# plus the kwok Stage CRD and stock stages under .../kwok/. k0smotron is not served by the module
# proxy; its CRDs are vendored in third_party/crds/k0smotron and copied from there.
# <key> is a hash of versions.env. Reuses a complete directory; prints the directory on its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
versions="$(dirname "$here")/src/colony/versions.env"
# shellcheck source=../src/colony/versions.env
source "$versions"

cache="${COLONY_CACHE_DIR:-$HOME/.cache/colony-operator}"
key="$(sha256sum "$versions" | cut -c1-12)"
out="$cache/crds/$key"
if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
log() { printf '[fetch-crds] %s\n' "$*" >&2; }

tmp="$out.partial"
rm -rf "$tmp"
mkdir -p "$tmp"

# module_dir MODULE@VERSION -> the extracted module root in the module cache
module_dir() {
  (cd / && go mod download -json "$1") | sed -n 's/.*"Dir": "\(.*\)",*/\1/p'
}

# take COMPONENT MODULE@VERSION PATH_IN_MODULE FILE...
take() {
  local component=$1 module=$2 sub=$3
  shift 3
  local dir
  dir="$(module_dir "$module")"
  [[ -n "$dir" ]] || { log "cannot download $module"; exit 1; }
  mkdir -p "$tmp/$component"
  for f in "$@"; do
    cp "$dir/$sub/$f" "$tmp/$component/$f"
  done
  chmod u+w "$tmp/$component"/*
  log "$component: $# files from $module"
}

capi="sigs.k8s.io/cluster-api@$CLUSTER_API_VERSION"
take cluster-api "$capi" core/config/crd/bases \
  cluster.x-k8s.io_clusters.yaml cluster.x-k8s.io_machinedeployments.yaml \
  cluster.x-k8s.io_machinesets.yaml cluster.x-k8s.io_machines.yaml
take cluster-api-kubeadm "$capi" bootstrap/kubeadm/config/crd/bases \
  bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml
take cluster-api-kubeadm "$capi" controlplane/kubeadm/config/crd/bases \
  controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml
take capd "sigs.k8s.io/cluster-api/test@$CLUSTER_API_TEST_VERSION" infrastructure/docker/config/crd/bases \
  infrastructure.cluster.x-k8s.io_dockerclusters.yaml infrastructure.cluster.x-k8s.io_dockermachines.yaml \
  infrastructure.cluster.x-k8s.io_dockermachinetemplates.yaml
take capa "sigs.k8s.io/cluster-api-provider-aws/v2@$CAPA_VERSION" config/crd/bases \
  infrastructure.cluster.x-k8s.io_awsclusters.yaml infrastructure.cluster.x-k8s.io_awsmachines.yaml \
  infrastructure.cluster.x-k8s.io_awsmachinetemplates.yaml
take caaph "sigs.k8s.io/cluster-api-addon-provider-helm@$CAAPH_VERSION" config/crd/bases \
  addons.cluster.x-k8s.io_helmchartproxies.yaml addons.cluster.x-k8s.io_helmreleaseproxies.yaml
take volcano "volcano.sh/volcano@$VOLCANO_VERSION" config/crd/volcano/bases \
  scheduling.volcano.sh_podgroups.yaml scheduling.volcano.sh_queues.yaml \
  topology.volcano.sh_hypernodes.yaml nodeinfo.volcano.sh_numatopologies.yaml
take kubeflow "github.com/kubeflow/training-operator@$KUBEFLOW_TRAINING_OPERATOR_VERSION" manifests/base/crds \
  kubeflow.org_pytorchjobs.yaml
take kuberay "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION" config/crd/bases \
  ray.io_rayclusters.yaml ray.io_rayjobs.yaml
take jobset "sigs.k8s.io/jobset@$JOBSET_VERSION" config/components/crd/bases jobset.x-k8s.io_jobsets.yaml
take kwok "sigs.k8s.io/kwok@$KWOK_VERSION" kustomize/crd/bases kwok.x-k8s.io_stages.yaml
# ServiceMonitor only: the Helm chart's optional ServiceMonitor is dry-run applied against it.
take prometheus-operator "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
  example/prometheus-operator-crd monitoring.coreos.com_servicemonitors.yaml
# kwok's stock stages (not CRDs): node initialise/heartbeat, pod ready/complete/delete.
take kwok-stages "sigs.k8s.io/kwok@$KWOK_VERSION" kustomize/stage/node/fast node-initialize.yaml
take kwok-stages "sigs.k8s.io/kwok@$KWOK_VERSION" kustomize/stage/node/heartbeat node-heartbeat.yaml
take kwok-stages "sigs.k8s.io/kwok@$KWOK_VERSION" kustomize/stage/pod/fast \
  pod-ready.yaml pod-complete.yaml pod-delete.yaml

mkdir -p "$tmp/k0smotron"
cp "$root"/third_party/crds/k0smotron/*.yaml "$tmp/k0smotron/"
log "k0smotron: vendored CRDs from third_party/crds/k0smotron ($K0SMOTRON_VERSION)"

touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
