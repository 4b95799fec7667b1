"""Cluster API core objects (v1beta2): the Cluster, and the MachineDeployments and Machines that
give it workers. Providers fill in the infrastructure and bootstrap references."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colony.render.context import ClusterContext
from colony.render.contract import Manifest
from colony.render.objects import (
    CAPI_CLUSTER_NAME_LABEL,
    CAPI_DEPLOYMENT_NAME_LABEL,
    CLUSTER,
    MACHINE,
    MACHINE_DEPLOYMENT,
    contract_ref,
)

POD_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/12"
SERVICE_DOMAIN = "cluster.local"


def cluster(
    ctx: ClusterContext, infrastructure: Manifest, control_plane: Manifest, labels: Mapping[str, str]
) -> Manifest:
    """The Cluster `<cn>`, pointing at its infrastructure cluster and control plane.

    `labels` are added to the ownership labels (which win): the add-ons' cluster selectors
    match them.
    Pod and service CIDRs are the k0s defaults; k0smotron passes them on to k0s.
    """
    spec: dict[str, Any] = {
        "clusterNetwork": {
            "pods": {"cidrBlocks": [POD_CIDR]},
            "services": {"cidrBlocks": [SERVICE_CIDR]},
            "serviceDomain": SERVICE_DOMAIN,
        },
        "controlPlaneRef": contract_ref(control_plane),
        "infrastructureRef": contract_ref(infrastructure),
    }
    extra = {key: value for key, value in labels.items() if key not in ctx.labels}
    return ctx.object(CLUSTER, ctx.capi_name, spec, labels=extra)


def machine_deployment(
    ctx: ClusterContext, replicas: int, bootstrap_template: Manifest, machine_template: Manifest
) -> Manifest:
    """The MachineDeployment `<cn>-md` with `replicas` workers from the given templates.

    Its Machines carry only the Cluster API selector labels, not the colony's ownership labels:
    they belong to the MachineDeployment, and must never look like objects the operator prunes.
    """
    name = f"{ctx.capi_name}-md"
    selector = {CAPI_CLUSTER_NAME_LABEL: ctx.capi_name, CAPI_DEPLOYMENT_NAME_LABEL: name}
    spec: dict[str, Any] = {
        "clusterName": ctx.capi_name,
        "replicas": replicas,
        "selector": {"matchLabels": dict(selector)},
        "template": {
            "metadata": {"labels": dict(selector)},
            "spec": _machine_spec(ctx, bootstrap_template, machine_template),
        },
    }
    return ctx.object(MACHINE_DEPLOYMENT, name, spec)


def machine(ctx: ClusterContext, name: str, bootstrap_config: Manifest, infrastructure: Manifest) -> Manifest:
    """A single Machine binding a bootstrap config to an infrastructure machine (remote hosts)."""
    spec = _machine_spec(ctx, bootstrap_config, infrastructure)
    return ctx.object(MACHINE, name, spec, labels={CAPI_CLUSTER_NAME_LABEL: ctx.capi_name})


def _machine_spec(ctx: ClusterContext, bootstrap: Manifest, infrastructure: Manifest) -> dict[str, Any]:
    return {
        "clusterName": ctx.capi_name,
        "version": ctx.version.capi,
        "bootstrap": {"configRef": contract_ref(bootstrap)},
        "infrastructureRef": contract_ref(infrastructure),
    }
