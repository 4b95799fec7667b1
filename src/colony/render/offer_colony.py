"""Pure: turn the offer the solver chose into a Colony that provisions exactly that.

The colony has one cluster on the offer's cloud, in the offer's region, with one worker per node of
the offer's instance type (spot when the offer is spot), labelled ephemeral so it is torn down after
its work. Only AWS can be provisioned today; any other cloud raises ProviderNotSupported instead of
rendering a cluster that would not match the offer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from colony.api import COLONY
from colony.labels import EPHEMERAL_LABEL
from colony.render.names import bounded_name
from colony.scheduling.offers.solver import RankedOffer

SUPPORTED_CLOUDS = ("aws",)
DEFAULT_DEPENDENCIES = ("nvidia-operator", "volcano-sh")


class ProviderNotSupported(ValueError):
    """The chosen offer's cloud cannot be provisioned by this operator yet."""


def ephemeral_colony_name(uid: str) -> str:
    """The name of the ephemeral colony a GPR provisions: derived from its uid (unique, stable
    across crashes and renames) and bounded to a valid object name."""
    return bounded_name(f"gpr-{uid.lower()}")


def colony_for_offer(
    choice: RankedOffer,
    *,
    name: str,
    namespace: str,
    k8s_version: str,
    dependencies: Sequence[str] = DEFAULT_DEPENDENCIES,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Colony manifest provisioning `choice` (ephemeral, priced from the offer), with `labels`
    and `annotations` added (e.g. the request it is for)."""
    offer = choice.offer
    if offer.cloud not in SUPPORTED_CLOUDS:
        raise ProviderNotSupported(
            f"provider {offer.cloud!r} not supported yet (offer {offer.instance_type} in {offer.region}); "
            f"supported: {', '.join(SUPPORTED_CLOUDS)}"
        )
    aws: dict[str, Any] = {
        "region": offer.region,
        "instanceType": offer.instance_type,
        "replicas": choice.nodes,
    }
    if choice.spot:
        aws["spot"] = True
    return {
        "apiVersion": COLONY.api_version,
        "kind": COLONY.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**(labels or {}), EPHEMERAL_LABEL: "true"},
            "annotations": {
                **(annotations or {}),
                "colony.exalsius.ai/offer": (
                    f"{offer.cloud} {offer.region} {offer.instance_type} x{choice.nodes}"
                    f" {'spot' if choice.spot else 'on-demand'} ${choice.price_per_hour:.4f}/h"
                ),
            },
        },
        "spec": {
            "k8sVersion": k8s_version,
            "workloadDependencies": [{"name": d} for d in dependencies],
            "colonyClusters": [{"clusterName": _cluster_name(offer.region), "awsEnabled": True, "aws": aws}],
        },
    }


def _cluster_name(region: str) -> str:
    return f"aws-{region}"[:40]
