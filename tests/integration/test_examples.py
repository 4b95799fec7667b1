"""The seed's YAML examples apply unchanged, list with printer columns and explain themselves."""

from __future__ import annotations

from colony.devenv.cluster import LocalCluster
from tests.integration.conftest import EXAMPLES

SEED_EXAMPLES = ("colony-aws.yaml", "colony-docker-ray.yaml", "ddpjob.yaml")


def test_seed_examples_apply_unchanged(management: LocalCluster, namespace: str) -> None:
    for name in SEED_EXAMPLES:
        management.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / name))
    colonies = management.kubectl("get", "colonies", "-n", namespace).stdout
    header = colonies.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "READY", "CLUSTERS", "GPUS", "$/H", "COST", "AGE"]
    assert "test-colony" in colonies and "docker-colony-ray" in colonies
    jobs = management.kubectl("get", "ddpjobs", "-n", namespace).stdout
    assert jobs.splitlines()[0].split() == [
        "NAME",
        "COLONY",
        "WORKERS",
        "GPUS/NODE",
        "PHASE",
        "READY",
        "GPU-H",
        "COST",
        "AGE",
    ]
    row = jobs.splitlines()[1].split()
    assert row[:4] == ["test-ddp-job", "test-colony", "2", "1"]


def test_short_names_and_category(management: LocalCluster, namespace: str) -> None:
    management.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "ddpjob.yaml"))
    assert "test-ddp-job" in management.kubectl("get", "ddp", "-n", namespace).stdout
    assert "test-ddp-job" in management.kubectl("get", "exalsius", "-n", namespace).stdout  # category
    management.kubectl("get", "col,gpr,gprs", "-n", namespace)


def test_kubectl_explain_shows_descriptions(management: LocalCluster) -> None:
    explained = management.kubectl("explain", "colony.spec.colonyClusters").stdout
    assert "The clusters of the colony; clusterName must be unique." in explained
    assert "awsEnabled" in explained and "Marks an AWS cluster" in explained
    job = management.kubectl("explain", "ddpjob.spec.nprocPerNode").stdout
    assert "torchrun processes per pod" in job
