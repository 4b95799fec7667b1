"""Docker (CAPD): DockerCluster, DockerMachineTemplate, k0s workers in a MachineDeployment."""

from __future__ import annotations

from colony.render import bootstrap, capi
from colony.render.context import ClusterContext
from colony.render.objects import DOCKER_CLUSTER, DOCKER_MACHINE_TEMPLATE, MANAGED_BY_ANNOTATION
from colony.render.providers.base import ProviderObjects


class DockerProvider:
    """Worker machines as containers on the management host (development and tests)."""

    name = "docker"
    machine_control_plane = True

    def render(self, ctx: ClusterContext, *, hosted_control_plane: bool) -> ProviderObjects:
        """DockerCluster `<cn>`, DockerMachineTemplate `<cn>-mt`, worker template and MachineDeployment.

        With a hosted control plane there is no load balancer to run: the DockerCluster is marked
        externally managed, and k0smotron reports the control plane endpoint instead.
        """
        docker = ctx.cluster.docker
        if docker is None:
            raise ValueError(f"cluster {ctx.cluster.cluster_name!r} has no docker block")
        annotations = {MANAGED_BY_ANNOTATION: "k0smotron"} if hosted_control_plane else None
        infra = ctx.object(DOCKER_CLUSTER, ctx.capi_name, {}, annotations=annotations)
        template = ctx.object(DOCKER_MACHINE_TEMPLATE, f"{ctx.capi_name}-mt", {"template": {"spec": {}}})
        worker_template = bootstrap.worker_config_template(ctx)
        deployment = capi.machine_deployment(ctx, docker.replicas, worker_template, template)
        return ProviderObjects(
            infrastructure_cluster=infra, machine_template=template, workers=(worker_template, deployment)
        )
