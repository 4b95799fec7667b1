"""Control planes, k0s everywhere.

- `hostedControlPlaneEnabled: true`: a k0smotron **K0smotronControlPlane** runs the API server,
  controller manager and scheduler as pods in the management cluster, reachable through a NodePort
  Service whose two ports are allocated deterministically (see `ports`) and recorded in status.
  Every machine of the colony cluster is then a GPU worker.
- `false`: a k0smotron **K0sControlPlane** installs a k0s controller on one of the provider's
  machines (same machine template as the workers).

Why K0sControlPlane rather than KubeadmControlPlane: the workers are bootstrapped by k0s in every
mode (k0smotron's RemoteMachine requires k0s bootstrap, and one bootstrap provider keeps docker,
aws and remote nodes identical). A kubeadm control plane would need kubeadm workers, i.e. a second
bootstrap provider, node image and version format. The controller also runs as a worker
(`--enable-worker --no-taints`): on a GPU instance its GPUs are not wasted.
"""

from __future__ import annotations

from typing import Any

from colony.render.context import ClusterContext
from colony.render.contract import HostedControlPlanePorts, Manifest
from colony.render.objects import K0S_CONTROL_PLANE, K0SMOTRON_CONTROL_PLANE, object_ref


def control_plane_name(ctx: ClusterContext) -> str:
    """`<cn>-cp`, in both modes."""
    return f"{ctx.capi_name}-cp"


def hosted(ctx: ClusterContext, ports: HostedControlPlanePorts, external_address: str | None) -> Manifest:
    """K0smotronControlPlane `<cn>-cp`: control plane pods in the management cluster.

    State lives in emptyDir; k0smotron's etcd PVCs are deleted with the control plane (they leaked
    in the reference operator).
    """
    spec: dict[str, Any] = {
        "version": ctx.version.k0s_image_tag,
        "persistence": {"type": "emptyDir"},
        "etcd": {"autoDeletePVCs": True, "persistence": {}},
        "service": {"type": "NodePort", "apiPort": ports.api, "konnectivityPort": ports.konnectivity},
    }
    if external_address:
        spec["externalAddress"] = external_address
    return ctx.object(K0SMOTRON_CONTROL_PLANE, control_plane_name(ctx), spec)


def on_machines(ctx: ClusterContext, machine_template: Manifest) -> Manifest:
    """K0sControlPlane `<cn>-cp`: one k0s controller (also a worker) on the provider's machines."""
    spec: dict[str, Any] = {
        "replicas": 1,
        "version": ctx.version.k0s,
        "k0sConfigSpec": {
            "args": ["--enable-worker", "--no-taints"],
            "k0s": {
                "apiVersion": "k0s.k0sproject.io/v1beta1",
                "kind": "ClusterConfig",
                "metadata": {"name": "k0s"},
                "spec": {
                    # Cluster API and k0smotron probe /healthz without credentials.
                    "api": {"extraArgs": {"anonymous-auth": "true"}},
                    "telemetry": {"enabled": False},
                },
            },
        },
        "machineTemplate": {"infrastructureRef": object_ref(machine_template)},
    }
    return ctx.object(K0S_CONTROL_PLANE, control_plane_name(ctx), spec)
