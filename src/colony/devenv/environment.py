"""A management cluster plus colony clusters, with every CRD installed: what `make dev` and the
integration tests run against."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from colony.devenv.cluster import LocalCluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.tools import Tools, repo_root

# Upstream CRD groups (directories written by hack/fetch-crds.sh) each kind of cluster gets.
MANAGEMENT_UPSTREAM = (
    "cluster-api",
    "cluster-api-kubeadm",
    "capd",
    "capa",
    "caaph",
    "k0smotron",
    "volcano",
    "kubeflow",
    "kuberay",
    "jobset",
)
COLONY_UPSTREAM = ("volcano", "kubeflow", "kuberay", "jobset")
"""What a colony with every framework add-on serves; a colony that should lack a framework is
started with fewer (`start_colony_cluster(..., upstream=...)`)."""

DEFAULT_COLONY_NODES = (
    GPUNodeSpec("a100", product="NVIDIA-A100-SXM4-80GB", gpus=8, gpu_memory_mib=81920, count=2),
    GPUNodeSpec("h100", product="NVIDIA-H100-80GB-HBM3", gpus=8, gpu_memory_mib=81559, count=1),
)


def own_crd_files() -> list[Path]:
    """colony-operator's CRDs, generated from the models into crds/."""
    return sorted((repo_root() / "crds").glob("*.yaml"))


def upstream_crd_files(tools: Tools, groups: Sequence[str]) -> list[Path]:
    """The upstream CRD files of the named groups, from the CRD cache."""
    files: list[Path] = []
    for group in groups:
        files += sorted((tools.upstream_crds / group).glob("*.yaml"))
    return files


def start_management_cluster(tools: Tools, name: str = "management", *, lean: bool = False) -> LocalCluster:
    """A management cluster with scheduler, controller-manager and kwok (`lean`: only etcd and
    kube-apiserver, for benchmarks that need none of them), and every CRD installed."""
    full = not lean
    cluster = LocalCluster(name, tools, scheduler=full, controller_manager=full, kwok=full)
    cluster.start()
    try:
        cluster.install_crds(own_crd_files() + upstream_crd_files(tools, MANAGEMENT_UPSTREAM))
    except BaseException:
        cluster.stop()
        raise
    return cluster


def start_colony_cluster(
    tools: Tools,
    name: str,
    nodes: Sequence[GPUNodeSpec] = DEFAULT_COLONY_NODES,
    upstream: Sequence[str] = COLONY_UPSTREAM,
    volcano: bool = True,
) -> LocalCluster:
    """A colony (workload) cluster with kube-scheduler, Volcano's scheduler (unless `volcano` is
    false), kwok GPU nodes and the framework CRDs of `upstream` (volcano is always installed)."""
    cluster = LocalCluster(name, tools, scheduler=True, controller_manager=False, kwok=True)
    cluster.start()
    try:
        cluster.install_crds(upstream_crd_files(tools, ("volcano", *(g for g in upstream if g != "volcano"))))
        cluster.add_gpu_nodes(nodes)
        if volcano:
            cluster.start_volcano_scheduler()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """Stop `cluster` when the block ends, however it ends."""
    try:
        yield cluster
    finally:
        cluster.stop()
