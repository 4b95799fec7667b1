"""On-prem SSH hosts (k0smotron "remote machines"): a RemoteCluster placeholder, and per host a
RemoteMachine (how to reach it), a K0sWorkerConfig (what to install) and a Machine binding them.

Each host's objects are named `<cn>-<hash of address:port>`, not by list position, so removing or
reordering hosts never renames (and so never re-provisions) the others.

Remote hosts only ever join as workers: a control plane on them would need k0smotron's
RemoteMachineTemplate/PooledRemoteMachine pool, so remote clusters always get a hosted control plane.
"""

from __future__ import annotations

from colony.api.colony import RemoteHost
from colony.render import bootstrap, capi
from colony.render.context import ClusterContext
from colony.render.contract import Manifest
from colony.render.names import short_hash
from colony.render.objects import REMOTE_CLUSTER, REMOTE_MACHINE
from colony.render.providers.base import ProviderObjects

SSH_KEY_SECRET_KEY = "value"
"""The only Secret key k0smotron reads the SSH private key from (RemoteMachine.spec.sshKeyRef)."""


def host_name(ctx: ClusterContext, host: RemoteHost) -> str:
    """Name of one host's RemoteMachine, K0sWorkerConfig and Machine: stable across list edits."""
    return f"{ctx.capi_name}-{short_hash(f'{host.address}:{host.port}')}"


class RemoteProvider:
    """Bare machines reachable over SSH join the colony as workers."""

    name = "remote"
    machine_control_plane = False

    def render(self, ctx: ClusterContext, *, hosted_control_plane: bool) -> ProviderObjects:
        """RemoteCluster `<cn>` and, per host, RemoteMachine + K0sWorkerConfig + Machine."""
        remote = ctx.cluster.remote
        if remote is None:
            raise ValueError(f"cluster {ctx.cluster.cluster_name!r} has no remote block")
        infra = ctx.object(REMOTE_CLUSTER, ctx.capi_name, {})
        workers: list[Manifest] = []
        problems: list[str] = []
        seen: dict[str, str] = {}
        for host in remote.hosts:
            endpoint = f"{host.address}:{host.port}"
            name = host_name(ctx, host)
            if name in seen:
                problems.append(f"host {endpoint} is listed twice; its second entry is ignored")
                continue
            seen[name] = endpoint
            ref = host.ssh_key_secret_ref
            if ref.key != SSH_KEY_SECRET_KEY:
                problems.append(
                    f"host {endpoint}: k0smotron reads the SSH key only from key "
                    f"{SSH_KEY_SECRET_KEY!r} of Secret {ref.name!r}, not from key {ref.key!r}; "
                    f"store the key under {SSH_KEY_SECRET_KEY!r}"
                )
            remote_machine = ctx.object(
                REMOTE_MACHINE,
                name,
                {
                    "address": host.address,
                    "port": host.port,
                    "user": host.user,
                    "useSudo": host.use_sudo,
                    "sshKeyRef": {"name": ref.name},
                },
            )
            config = bootstrap.worker_config(ctx, name)
            workers += [remote_machine, config, capi.machine(ctx, name, config, remote_machine)]
        return ProviderObjects(infrastructure_cluster=infra, workers=tuple(workers), problems=tuple(problems))
