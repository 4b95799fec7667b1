"""Pure: the Helm releases the operator installs itself on a colony's `existing` clusters.

CAAPH only installs HelmChartProxies on Cluster API Clusters, so a cluster registered by a
kubeconfig Secret would get none of the colony's dependencies. For those clusters the operator
runs Helm itself (kube/helm.py); this module turns the very HelmChartProxies `render.addons` plans
(same catalog, values, pinned versions, options) into one `HelmReleasePlan` per existing cluster
and dependency whose clusterSelector matches the labels that cluster would carry.

Every field that reaches the helm command line is validated here (tenant input): chart names,
release names, namespaces and versions must look like what they are, never like a flag or a
path, and repositories must be https or oci URLs (the CRD's pattern, api/colony.py), so a tenant
can neither pass options to helm nor make the operator read a chart from its own file system or
fetch plain-http URLs inside the cluster network.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from colony.api.colony import HELM_REPO_URL_PATTERN, ColonySpec
from colony.labels import ADDON_LABEL, COLONY_LABEL
from colony.render.addons import DEFAULT_OPTIONS, plan_addons
from colony.render.contract import ColonyRef, Manifest, RenderedColony

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$")
"""Helm release names: DNS labels of at most 53 characters (Helm's own limit)."""
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
VERSION = re.compile(r"^v?[0-9A-Za-z][0-9A-Za-z.+~^<>=*, |-]{0,63}$")
REPO_URL = re.compile(HELM_REPO_URL_PATTERN)
TIMEOUT = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$")
UNSUPPORTED_FIELDS = ("credentials", "tlsConfig")
"""HelmChartProxySpec fields that name management-cluster Secrets; not read for existing clusters."""


@dataclass(frozen=True)
class HelmReleasePlan:
    """One Helm release on one existing cluster of a colony."""

    cluster: str
    """clusterName in the Colony spec."""
    kubeconfig_secret: str
    kubeconfig_key: str
    dependency: str
    helm_chart_proxy: str
    """The HelmChartProxy the release mirrors (status.addons is aggregated per proxy)."""
    release_name: str
    namespace: str
    chart_ref: str
    """Chart name (with `repo`) or a full `oci://` reference (without)."""
    repo: str | None
    version: str | None
    values: Mapping[str, Any] = field(default_factory=dict)
    wait: bool = True
    timeout: str = "10m"
    create_namespace: bool = True

    @property
    def spec_hash(self) -> str:
        """A digest of everything that, changed, needs a `helm upgrade` (kept as a release label)."""
        wire = json.dumps(
            [
                self.release_name,
                self.chart_ref,
                self.repo,
                self.version,
                self.namespace,
                self.values,
                self.wait,
                self.timeout,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(wire.encode()).hexdigest()[:16]


def plan_existing_releases(
    colony: ColonyRef, spec: ColonySpec, rendered: RenderedColony
) -> tuple[list[HelmReleasePlan], dict[str, str]]:
    """The releases to install on the colony's existing clusters, and the HelmChartProxies that
    cannot be installed there, with the reason (never raised)."""
    existing = [c for c in rendered.clusters if c.capi_cluster_name is None and not c.problems]
    if not existing:
        return [], {}
    labels = {**plan_addons(colony, spec).cluster_labels, COLONY_LABEL: colony.name}
    plans: list[HelmReleasePlan] = []
    refused: dict[str, str] = {}
    for proxy in rendered.addons:
        if not _selects(proxy, labels):
            continue
        for cluster in existing:
            plan, problem = _plan(
                proxy, cluster.cluster_name, cluster.kubeconfig_secret, cluster.kubeconfig_key
            )
            if plan is not None:
                plans.append(plan)
            else:
                refused[proxy["metadata"]["name"]] = problem
    return plans, refused


def _selects(proxy: Manifest, labels: Mapping[str, str]) -> bool:
    wanted = ((proxy["spec"].get("clusterSelector") or {}).get("matchLabels")) or {}
    return all(labels.get(key) == value for key, value in wanted.items())


def _plan(proxy: Manifest, cluster: str, secret: str, key: str) -> tuple[HelmReleasePlan | None, str]:
    spec: Mapping[str, Any] = proxy["spec"]
    name = proxy["metadata"]["name"]
    dependency = proxy["metadata"].get("labels", {}).get(ADDON_LABEL, name)

    def refuse(reason: str) -> tuple[None, str]:
        return None, f"dependency {dependency!r} cannot be installed on existing clusters: {reason}"

    for unsupported in UNSUPPORTED_FIELDS:
        if spec.get(unsupported):
            return refuse(f"{unsupported} is only supported on Cluster API clusters")
    repo_url = str(spec.get("repoURL") or "")
    chart_name = str(spec.get("chartName") or "")
    release = str(spec.get("releaseName") or dependency)
    namespace = str(spec.get("namespace") or "default")
    version = spec.get("version")
    if not REPO_URL.match(repo_url):
        return refuse(f"repoURL {repo_url!r} is not an https:// or oci:// URL")
    if not CHART_NAME.match(chart_name):
        return refuse(f"chartName {chart_name!r} is not a chart name")
    if not DNS_LABEL.match(release):
        return refuse(f"releaseName {release!r} is not a DNS label of at most 53 characters")
    if not NAMESPACE.match(namespace):
        return refuse(f"namespace {namespace!r} is not a DNS label")
    if version is not None and not VERSION.match(str(version)):
        return refuse(f"version {version!r} is not a chart version")
    values, problem = _values(spec.get("valuesTemplate"))
    if problem:
        return refuse(problem)
    options = {**DEFAULT_OPTIONS, **(spec.get("options") or {})}
    timeout = str(options.get("timeout") or DEFAULT_OPTIONS["timeout"])
    if not TIMEOUT.match(timeout):
        return refuse(f"options.timeout {timeout!r} is not a duration such as 10m")
    oci = repo_url.startswith("oci://")
    return (
        HelmReleasePlan(
            cluster=cluster,
            kubeconfig_secret=secret,
            kubeconfig_key=key,
            dependency=dependency,
            helm_chart_proxy=name,
            release_name=release,
            namespace=namespace,
            chart_ref=f"{repo_url.rstrip('/')}/{chart_name}" if oci else chart_name,
            repo=None if oci else repo_url,
            version=None if version is None else str(version),
            values=values,
            wait=bool(options.get("wait", True)),
            timeout=timeout,
            create_namespace=bool((options.get("install") or {}).get("createNamespace", True)),
        ),
        "",
    )


def _values(template: object) -> tuple[dict[str, Any], str]:
    """The values of a valuesTemplate; Go templating is CAAPH's and is refused here."""
    if template is None or template == "":
        return {}, ""
    if not isinstance(template, str):
        return {}, "valuesTemplate is not a string"
    if "{{" in template:
        return (
            {},
            "valuesTemplate uses Go templating, which only CAAPH renders (Cluster API clusters)",
        )
    try:
        values = yaml.safe_load(template)
    except yaml.YAMLError as error:
        return {}, f"valuesTemplate is not YAML: {str(error).splitlines()[0]}"
    if values is None:
        return {}, ""
    if not isinstance(values, dict):
        return {}, "valuesTemplate is not a YAML mapping"
    return values, ""
