"""k0s worker bootstrap (k0smotron's bootstrap provider), the one bootstrap provider of every
Cluster API-backed colony cluster: docker and aws workers and remote hosts alike. One provider
everywhere keeps the nodes identical, and k0smotron's RemoteMachine only works with k0s bootstrap."""

from __future__ import annotations

from typing import Any

from colony.render.context import ClusterContext
from colony.render.contract import Manifest
from colony.render.objects import K0S_WORKER_CONFIG, K0S_WORKER_CONFIG_TEMPLATE


def worker_config_spec(ctx: ClusterContext) -> dict[str, Any]:
    """The K0sWorkerConfig spec: the k0s release to install."""
    return {"version": ctx.version.k0s}


def worker_config_template(ctx: ClusterContext) -> Manifest:
    """The K0sWorkerConfigTemplate `<cn>-worker` that MachineDeployments bootstrap workers from."""
    spec = {"template": {"spec": worker_config_spec(ctx)}}
    return ctx.object(K0S_WORKER_CONFIG_TEMPLATE, f"{ctx.capi_name}-worker", spec)


def worker_config(ctx: ClusterContext, name: str) -> Manifest:
    """A K0sWorkerConfig for one pre-existing machine (a remote host)."""
    return ctx.object(K0S_WORKER_CONFIG, name, worker_config_spec(ctx))
