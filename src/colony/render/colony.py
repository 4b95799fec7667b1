"""Render a whole Colony: per cluster the Cluster API objects of its provider and control plane,
plus the colony's add-ons. Pure: the controller applies the result with server-side apply."""

from __future__ import annotations

from collections.abc import Mapping, Set

from colony.api.colony import ColonyCluster, ColonySpec
from colony.render import capi, controlplane
from colony.render.addons import plan_addons
from colony.render.context import DEFAULT_AWS_INSTANCE_PROFILES, ClusterContext
from colony.render.contract import (
    ColonyRef,
    HostedControlPlanePorts,
    Manifest,
    RenderedCluster,
    RenderedColony,
)
from colony.render.k8s_versions import KubernetesVersion
from colony.render.labels import kubeconfig_secret_name
from colony.render.names import name_problem
from colony.render.ports import allocate_hosted_ports, hosted_ports_key
from colony.render.providers import PROVIDERS

CAPI_KUBECONFIG_KEY = "value"


def render_colony(
    colony: ColonyRef,
    spec: ColonySpec,
    ports: Mapping[str, HostedControlPlanePorts],
    *,
    aws_instance_profiles: frozenset[str] = DEFAULT_AWS_INSTANCE_PROFILES,
) -> RenderedColony:
    """Everything the colony needs in the management cluster, in its namespace.

    `ports` maps clusterName to the hosted control-plane NodePorts the controller recorded; a
    hosted cluster missing from it gets a deterministic allocation (`allocate_hosted_ports`),
    returned in `RenderedCluster.hosted_ports` for the controller to record. Problems that do not
    stop rendering (unknown dependencies, unsupported settings) are returned, never raised; each
    cluster's own problems are also in `RenderedCluster.problems`. `aws_instance_profiles` is the
    admin's allowlist of worker instance profiles (COLONY_AWS_INSTANCE_PROFILES). (ValueError only for a spec
    that bypassed ColonySpec validation, e.g. a malformed k8sVersion.)
    """
    version = KubernetesVersion.parse(spec.k8s_version)
    addons = plan_addons(colony, spec)
    problems = list(addons.problems)
    used_ports = {port for pair in ports.values() for port in (pair.api, pair.konnectivity)}
    clusters = []
    for cluster in spec.colony_clusters:
        rendered = _render_cluster(
            ClusterContext.create(colony, cluster, version, aws_instance_profiles),
            spec,
            addons.cluster_labels,
            ports.get(cluster.cluster_name),
            used_ports,
        )
        if rendered.hosted_ports is not None:
            used_ports |= {rendered.hosted_ports.api, rendered.hosted_ports.konnectivity}
        problems += [f"cluster {cluster.cluster_name!r}: {problem}" for problem in rendered.problems]
        clusters.append(rendered)
    return RenderedColony(clusters=tuple(clusters), addons=addons.proxies, problems=tuple(problems))


def _render_cluster(
    ctx: ClusterContext,
    spec: ColonySpec,
    addon_labels: Mapping[str, str],
    recorded_ports: HostedControlPlanePorts | None,
    used_ports: Set[int],
) -> RenderedCluster:
    cluster: ColonyCluster = ctx.cluster
    provider = PROVIDERS[cluster.provider]
    hosted = spec.hosted_control_plane_enabled or not provider.machine_control_plane
    objects = provider.render(ctx, hosted_control_plane=hosted)
    problems = list(objects.problems)
    if objects.refused:
        return RenderedCluster(
            cluster_name=cluster.cluster_name,
            provider=provider.name,
            capi_cluster_name=ctx.capi_name,
            manifests=(),
            kubeconfig_secret=kubeconfig_secret_name(ctx.capi_name),
            kubeconfig_key=CAPI_KUBECONFIG_KEY,
            problems=tuple(problems),
            kept_as_is=True,
        )
    infrastructure = objects.infrastructure_cluster
    if infrastructure is None:
        if objects.kubeconfig is None:
            raise ValueError(f"provider {provider.name!r} rendered neither objects nor a kubeconfig")
        return RenderedCluster(
            cluster_name=cluster.cluster_name,
            provider=provider.name,
            capi_cluster_name=None,
            manifests=(),
            kubeconfig_secret=objects.kubeconfig.name,
            kubeconfig_key=objects.kubeconfig.key,
            problems=tuple(problems),
        )
    hosted_ports: HostedControlPlanePorts | None = None
    manifests: list[Manifest] = [infrastructure]
    if objects.machine_template is not None:
        manifests.append(objects.machine_template)
    if hosted:
        if not spec.hosted_control_plane_enabled:
            problems.append(
                f"{provider.name} clusters cannot run their control plane on their own machines; "
                "it is hosted in the management cluster although hostedControlPlaneEnabled is false"
            )
        hosted_ports = recorded_ports or allocate_hosted_ports(
            hosted_ports_key(ctx.colony.namespace, ctx.colony.name, cluster.cluster_name), used_ports
        )
        control_plane = controlplane.hosted(ctx, hosted_ports, spec.external_address)
    elif objects.machine_template is None:
        raise ValueError(f"provider {provider.name!r} rendered no machine template for its control plane")
    else:
        control_plane = controlplane.on_machines(ctx, objects.machine_template)
    manifests += [
        control_plane,
        capi.cluster(ctx, infrastructure, control_plane, addon_labels),
        *objects.workers,
    ]
    name_problems = sorted({p for m in manifests if (p := name_problem(m["metadata"]["name"]))})
    if name_problems:
        problems += [
            *name_problems,
            "nothing is rendered for this cluster: shorten the colony or cluster name",
        ]
        manifests = []
    return RenderedCluster(
        cluster_name=cluster.cluster_name,
        provider=provider.name,
        capi_cluster_name=ctx.capi_name,
        manifests=tuple(manifests),
        kubeconfig_secret=kubeconfig_secret_name(ctx.capi_name),
        kubeconfig_key=CAPI_KUBECONFIG_KEY,
        hosted_ports=hosted_ports,
        problems=tuple(problems),
    )
