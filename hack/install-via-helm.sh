#!/usr/bin/env bash
# Install colony-operator and everything it needs into the cluster of the current kubectl context:
#
#   1. cert-manager                      (Helm chart jetstack/cert-manager)
#   2. cluster-api-operator              (Helm chart capi-operator/cluster-api-operator), which installs
#        Cluster API core, the k0smotron bootstrap, control-plane and infrastructure providers (k0s
#        control planes, remote SSH hosts), the Docker and/or AWS infrastructure providers, and the
#        Cluster API add-on provider Helm (CAAPH)
#   3. colony-operator                   (charts/colony-operator, CRDs included)
#
# at the versions pinned in src/colony/versions.env (nothing here names a version).
#
# Usage: hack/install-via-helm.sh [VALUES.yaml ...]
#   VALUES.yaml  values of the colony-operator chart (see charts/colony-operator/values.yaml); several
#                files are merged in order, later ones win.
#
# Environment:
#   INFRA_PROVIDERS    comma-separated infrastructure providers: docker, aws (default: docker)
#   AWS_B64ENCODED_CREDENTIALS
#                      required with aws: `clusterawsadm bootstrap credentials encode-as-profile`
#   NAMESPACE          namespace of the operator (default: colony-system)
#   RELEASE            Helm release name of the operator (default: colony-operator)
#   HELM, KUBECTL      the helm and kubectl to use (default: from PATH, else the pinned ones that
#                      hack/build-control-plane.sh builds)
#   TIMEOUT            how long to wait for each step (default: 15m)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=../src/colony/versions.env
source "$root/src/colony/versions.env"

log() { printf '[install-via-helm] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

namespace="${NAMESPACE:-colony-system}"
release="${RELEASE:-colony-operator}"
timeout="${TIMEOUT:-15m}"
providers="${INFRA_PROVIDERS:-docker}"

values_args=()
for values in "$@"; do
  [[ -f "$values" ]] || die "values file $values does not exist"
  values_args+=(--values "$values")
done

# tool NAME: the command to run NAME with (PATH first, then the pinned build).
tool() {
  if command -v "$1" >/dev/null 2>&1; then
    command -v "$1"
    return
  fi
  log "$1 is not on PATH; using the pinned one (hack/build-control-plane.sh builds it once)"
  printf '%s/%s\n' "$(bash "$here/build-control-plane.sh" | tail -n 1)" "$1"
}
helm="${HELM:-$(tool helm)}"
kubectl="${KUBECTL:-$(tool kubectl)}"

"$kubectl" version >/dev/null 2>&1 || die "no cluster answers in the current kubectl context"
log "installing into context $("$kubectl" config current-context 2>/dev/null || echo '(in-cluster)')"

# -- 1. cert-manager (webhooks of Cluster API and its operator need certificates) ----------------------
"$helm" repo add jetstack https://charts.jetstack.io --force-update >/dev/null
"$helm" repo add capi-operator https://kubernetes-sigs.github.io/cluster-api-operator --force-update >/dev/null
"$helm" repo update jetstack capi-operator >/dev/null
log "cert-manager $CERT_MANAGER_VERSION"
"$helm" upgrade --install cert-manager jetstack/cert-manager \
  --namespace cert-manager --create-namespace \
  --version "$CERT_MANAGER_VERSION" \
  --set crds.enabled=true \
  --wait --timeout "$timeout"

# -- 2. Cluster API and its providers through cluster-api-operator --------------------------------------
infra_providers=(k0sproject-k0smotron)
infra_versions=("$K0SMOTRON_VERSION")
config_secret=""
IFS=',' read -r -a wanted <<<"$providers"
for provider in "${wanted[@]}"; do
  case "$provider" in
    docker)
      infra_providers+=(docker)
      infra_versions+=("$CLUSTER_API_VERSION")
      ;;
    aws)
      [[ -n "${AWS_B64ENCODED_CREDENTIALS:-}" ]] ||
        die "INFRA_PROVIDERS has aws but AWS_B64ENCODED_CREDENTIALS is empty (clusterawsadm bootstrap credentials encode-as-profile)"
      infra_providers+=(aws)
      infra_versions+=("$CAPA_VERSION")
      config_secret=capi-provider-variables
      "$kubectl" create namespace capi-operator-system --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
      "$kubectl" create secret generic "$config_secret" --namespace capi-operator-system \
        --from-literal=AWS_B64ENCODED_CREDENTIALS="$AWS_B64ENCODED_CREDENTIALS" \
        --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
      ;;
    "") ;;
    *) die "unknown infrastructure provider '$provider' in INFRA_PROVIDERS (docker, aws)" ;;
  esac
done

provider_values="$(mktemp)"
trap 'rm -f "$provider_values"' EXIT
{
  echo "core:"
  echo "  cluster-api: {version: $CLUSTER_API_VERSION}"
  echo "bootstrap:"
  echo "  k0sproject-k0smotron: {version: $K0SMOTRON_VERSION}"
  echo "controlPlane:"
  echo "  k0sproject-k0smotron: {version: $K0SMOTRON_VERSION}"
  echo "addon:"
  echo "  helm: {version: $CAAPH_VERSION}"
  echo "infrastructure:"
  for i in "${!infra_providers[@]}"; do
    echo "  ${infra_providers[$i]}: {version: ${infra_versions[$i]}}"
  done
  if [[ -n "$config_secret" ]]; then
    echo "configSecret: {name: $config_secret, namespace: capi-operator-system}"
  fi
} >"$provider_values"

log "cluster-api-operator $CAPI_OPERATOR_VERSION: Cluster API $CLUSTER_API_VERSION, k0smotron $K0SMOTRON_VERSION," \
  "CAAPH $CAAPH_VERSION, infrastructure ${infra_providers[*]}"
"$helm" upgrade --install capi-operator capi-operator/cluster-api-operator \
  --namespace capi-operator-system --create-namespace \
  --version "${CAPI_OPERATOR_VERSION#v}" \
  --values "$provider_values" \
  --wait --timeout "$timeout"

# Each provider the operator installs, as KIND/NAME -n NAMESPACE (the chart's default namespaces).
wait_ready() {
  log "waiting for $1/$2 in $3"
  "$kubectl" wait "$1/$2" --namespace "$3" --for=condition=Ready --timeout "$timeout"
}
wait_ready coreprovider cluster-api capi-system
wait_ready bootstrapprovider k0sproject-k0smotron k0sproject-k0smotron-bootstrap-system
wait_ready controlplaneprovider k0sproject-k0smotron k0sproject-k0smotron-control-plane-system
wait_ready addonprovider helm helm-addon-system
for provider in "${infra_providers[@]}"; do
  wait_ready infrastructureprovider "$provider" "$provider-infrastructure-system"
done
# The colony-operator chart's HelmChartProxies (addons.*) need CAAPH's CRD.
"$kubectl" wait --for=condition=Established --timeout "$timeout" crd/helmchartproxies.addons.cluster.x-k8s.io

# -- 3. colony-operator -----------------------------------------------------------------------------------
log "colony-operator (release $release in namespace $namespace)"
"$helm" upgrade --install "$release" "$root/charts/colony-operator" \
  --namespace "$namespace" --create-namespace \
  "${values_args[@]}" \
  --wait --timeout "$timeout"
log "done: kubectl get colonies,ddpjobs,gprs -A"
