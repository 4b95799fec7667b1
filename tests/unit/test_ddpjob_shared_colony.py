"""A gpuTypes DDPJob whose GPU request was admitted onto another namespace's shared colony keeps
that colony's namespace from placement to deletion (issue 17, "Shared colonies"), with fakes for
the management cluster and the colony cluster."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any, cast

import kopf
import pytest

from colony.api.ddpjob import DDPJobSpec
from colony.controllers import ddpjob
from colony.controllers.job_pods import JobPods

SHARE = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "ColonyShare",
    "metadata": {"name": "ops-pool"},
    "spec": {"colony": {"namespace": "ops", "name": "pool"}, "namespaces": ["team"]},
}


def _colony(namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "pool", "namespace": namespace, "uid": f"uid-{namespace}"},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": "pool-kubeconfig"}}}
            ],
        },
    }


class Management:
    """The management cluster: the job's Ready GPR on `ops/pool`, a colony `pool` in both `ops` and
    the tenant's own namespace `team` (the same name), and the given ColonyShares."""

    def __init__(self, shares: list[dict[str, Any]]) -> None:
        self.shares = shares
        self.colony_reads: list[str] = []

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return manifest

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> Any:
        if kind == "GPUProvisioningRequest":
            assert namespace == "team"  # the job's own request, in its namespace
            nodes = [{"cluster": "onprem", "node": "n1", "gpus": 2}]
            status = {"phase": "Ready", "colony": "ops/pool", "reservationLabel": "gpr/x", "nodes": nodes}
            return {"status": status}
        if kind == "Colony":
            self.colony_reads.append(f"{namespace}/{name}")
            return _colony(str(namespace))
        return None

    async def list(self, api_version: str, kind: str, namespace: str | None = None, **_: Any) -> Any:
        return self.shares if kind == "ColonyShare" else []


class ColonyCluster:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def list(self, api_version: str, kind: str, namespace: str | None = None, **_: Any) -> Any:
        return [{"metadata": {"name": "job-w0"}}] if kind == "Pod" else []

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> None:
        self.deleted.append(f"{kind} {namespace}/{name}")


class Clients:
    """Colony cluster clients by the namespace of their kubeconfig Secret."""

    def __init__(self) -> None:
        self.by_namespace = {"ops": ColonyCluster(), "team": ColonyCluster()}

    async def client(self, namespace: str, secret: str, key: str = "value") -> Any:
        return self.by_namespace[namespace]


def _context(shares: list[dict[str, Any]]) -> Any:
    return SimpleNamespace(kube=Management(shares), colony_clients=Clients(), job_pods=JobPods())


BODY = {"metadata": {"name": "job", "namespace": "team", "uid": "u1"}}
SPEC = DDPJobSpec.model_validate(
    {"image": "busybox", "scriptPath": "/a.py", "parallelism": 1, "nprocPerNode": 2, "gpuTypes": ["H100"]}
)


def test_a_request_admitted_on_a_shared_colony_places_the_job_there_with_its_namespace() -> None:
    context = _context([SHARE])
    placed = asyncio.run(ddpjob._place_on_gpu_request(context, cast(kopf.Body, BODY), SPEC))
    namespace, colony, cluster, _, _, reservation = placed
    assert (namespace, colony, cluster) == ("ops", "pool", "onprem")
    assert reservation == {"gpuRequest": "job-gpus", "reservationLabel": "gpr/x"}


def test_a_colony_no_longer_shared_is_not_launched_on() -> None:
    context = _context([])
    with pytest.raises(ddpjob.Unplaceable, match="not shared with namespace team"):
        asyncio.run(ddpjob._place_on_gpu_request(context, cast(kopf.Body, BODY), SPEC))


def test_deletion_cleans_up_on_the_shared_colony_not_on_the_tenants_same_named_one() -> None:
    context = _context([SHARE])
    status = {"colony": "pool", "colonyNamespace": "ops", "cluster": "onprem", "gpuRequest": "job-gpus"}
    meta = {**BODY["metadata"]}
    asyncio.run(
        ddpjob.delete_ddpjob(
            body=cast(kopf.Body, {"metadata": meta, "status": status}),
            spec=cast(kopf.Spec, {}),
            meta=cast(kopf.Meta, meta),
            status=cast(kopf.Status, status),
            memo=cast(kopf.Memo, SimpleNamespace(context=context)),
            retry=0,
            logger=logging.getLogger("test"),
        )
    )
    assert context.kube.colony_reads == ["ops/pool"]
    assert context.colony_clients.by_namespace["ops"].deleted == ["Pod team/job-w0"]
    assert context.colony_clients.by_namespace["team"].deleted == []
