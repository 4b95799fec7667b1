"""AWS (CAPA): AWSCluster, AWSMachineTemplate, k0s workers in a MachineDeployment.

With a hosted control plane the AWSCluster is marked externally managed, as k0smotron documents
for CAPA: CAPA then creates no VPC, subnets or API load balancer. k0smotron's example gives the
AWSCluster an existing VPC and subnets; ColonySpec has no fields for them yet, so hosted AWS
clusters need that gap closed before their machines can launch. Without a hosted control plane
(the seed's AWS colony) CAPA creates the network and a load balancer in front of the
K0sControlPlane machine.

Without an `ami`, CAPA looks up its own published image for the Kubernetes version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colony.render import bootstrap, capi
from colony.render.context import ClusterContext
from colony.render.objects import AWS_CLUSTER, AWS_MACHINE_TEMPLATE, MANAGED_BY_ANNOTATION
from colony.render.providers.base import ProviderObjects

K0S_JOIN_API_RULE: Mapping[str, str | int] = {
    "description": "k0s controller join API",
    "protocol": "tcp",
    "fromPort": 9443,
    "toPort": 9443,
}


class AwsProvider:
    """Worker machines as EC2 instances."""

    name = "aws"
    machine_control_plane = True

    def render(self, ctx: ClusterContext, *, hosted_control_plane: bool) -> ProviderObjects:
        """AWSCluster `<cn>`, AWSMachineTemplate `<cn>-mt`, worker template and MachineDeployment."""
        aws = ctx.cluster.aws
        if aws is None:
            raise ValueError(f"cluster {ctx.cluster.cluster_name!r} has no aws block")
        if aws.iam_instance_profile not in ctx.aws_instance_profiles:
            # The workers launch with the admin's CAPA identity, and whoever controls a node reads
            # its profile's credentials from the instance metadata: a tenant may only attach what
            # the admin allows (COLONY_AWS_INSTANCE_PROFILES), never e.g. the controllers' profile.
            allowed = ", ".join(sorted(ctx.aws_instance_profiles)) or "none"
            return ProviderObjects(
                problems=(
                    f"aws.iamInstanceProfile {aws.iam_instance_profile!r} is not allowed by the operator "
                    f"(allowed: {allowed}); nothing is rendered for this cluster and what already runs for "
                    "it is left as it is",
                ),
                refused=True,
            )
        cluster_spec: dict[str, Any] = {"region": aws.region}
        machine: dict[str, Any] = {
            "instanceType": aws.instance_type,
            "iamInstanceProfile": aws.iam_instance_profile,
            # Public addresses for SSH access and a way out to a hosted control plane.
            "publicIP": True,
            # k0s bootstrap data goes straight into user data, not through Secrets Manager, and
            # compressed: a k0s controller's certificates would not fit EC2's 16 KiB otherwise.
            "cloudInit": {"insecureSkipSecretsManager": True},
            "uncompressedUserData": False,
        }
        if aws.ssh_key_name is not None:
            cluster_spec["sshKeyName"] = aws.ssh_key_name
            machine["sshKeyName"] = aws.ssh_key_name
        if aws.ami is not None:
            machine["ami"] = {"id": aws.ami}
        if aws.spot:
            machine["spotMarketOptions"] = (
                {"maxPrice": f"{aws.spot_max_price:g}"} if aws.spot_max_price is not None else {}
            )
        annotations = None
        if hosted_control_plane:
            annotations = {MANAGED_BY_ANNOTATION: "k0smotron"}
        else:
            # As k0smotron documents for K0sControlPlane on EC2: a TCP health check on the API
            # load balancer, and the k0s controller join API open between controllers.
            cluster_spec["controlPlaneLoadBalancer"] = {"healthCheckProtocol": "TCP"}
            cluster_spec["network"] = {"additionalControlPlaneIngressRules": [dict(K0S_JOIN_API_RULE)]}
        infra = ctx.object(AWS_CLUSTER, ctx.capi_name, cluster_spec, annotations=annotations)
        template = ctx.object(AWS_MACHINE_TEMPLATE, f"{ctx.capi_name}-mt", {"template": {"spec": machine}})
        worker_template = bootstrap.worker_config_template(ctx)
        deployment = capi.machine_deployment(ctx, aws.replicas, worker_template, template)
        return ProviderObjects(
            infrastructure_cluster=infra, machine_template=template, workers=(worker_template, deployment)
        )
