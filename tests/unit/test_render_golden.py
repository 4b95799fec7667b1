"""Golden files of everything rendered for the seed colonies and each provider and control-plane mode.

Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest tests/unit/test_render_golden.py`
and review the diff of tests/unit/golden/.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.api.colony import CAPA_NODES_INSTANCE_PROFILE, ColonySpec
from colony.render import ColonyRef, HostedControlPlanePorts, RenderedColony, render_colony

GOLDEN = Path(__file__).with_name("golden")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMESPACE = "team-a"
UID = "6f1c2a9e-0d5b-4c1e-9a57-3b2f8e4d7c10"


def seed(file_name: str) -> tuple[str, dict[str, Any]]:
    """(name, spec) of a seed example Colony, exactly as the file has them."""
    document = yaml.safe_load((EXAMPLES / file_name).read_text())
    return document["metadata"]["name"], document["spec"]


def docker(hosted: bool) -> dict[str, Any]:
    return {
        "k8sVersion": "v1.31.4",
        "workloadDependencies": [{"name": "volcano-sh"}],
        "hostedControlPlaneEnabled": hosted,
        "colonyClusters": [{"clusterName": "dev", "dockerEnabled": True, "docker": {"replicas": 2}}],
    }


def aws(hosted: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "k8sVersion": "v1.30.3",
        "workloadDependencies": [{"name": "nvidia-operator"}],
        "hostedControlPlaneEnabled": hosted,
        "colonyClusters": [
            {
                "clusterName": "gpu",
                "aws": {"replicas": 3, "region": "eu-central-1", "instanceType": "g5.2xlarge"},
            }
        ],
    }
    if hosted:
        spec["externalAddress"] = "203.0.113.10"
        cluster = spec["colonyClusters"][0]["aws"]
        cluster.update(ami="ami-0123456789abcdef0", sshKeyName="ops", iamInstanceProfile="gpu-nodes")
    return spec


def remote() -> dict[str, Any]:
    return {
        "k8sVersion": "v1.30.3",
        "workloadDependencies": [{"name": "nvidia-operator"}, {"name": "kubeflow-training"}],
        "hostedControlPlaneEnabled": True,
        "externalAddress": "mgmt.example.com",
        "colonyClusters": [
            {
                "clusterName": "lab",
                "remoteClusterEnabled": True,
                "remote": {
                    "hosts": [
                        {"address": "10.0.0.11", "sshKeySecretRef": {"name": "lab-ssh"}},
                        {
                            "address": "gpu2.lab.example.com",
                            "port": 2222,
                            "user": "ubuntu",
                            "useSudo": True,
                            "sshKeySecretRef": {"name": "gpu2-ssh", "key": "value"},
                        },
                    ]
                },
            }
        ],
    }


def existing() -> dict[str, Any]:
    return {
        "k8sVersion": "v1.32.1",
        "workloadDependencies": [{"name": "kuberay"}, {"name": "kube-prometheus-stack"}],
        "colonyClusters": [
            {
                "clusterName": "onprem",
                "existing": {"kubeconfigSecretRef": {"name": "onprem-kubeconfig", "key": "config"}},
            }
        ],
    }


# name -> (colony name, spec as a user writes it, recorded hosted control-plane ports)
Case = tuple[str, dict[str, Any], Mapping[str, HostedControlPlanePorts]]
CASES: dict[str, Callable[[], Case]] = {
    "seed-aws": lambda: (*seed("colony-aws.yaml"), {}),
    "seed-docker-ray": lambda: (*seed("colony-docker-ray.yaml"), {}),
    "docker-hosted": lambda: ("dev", docker(True), {"dev": HostedControlPlanePorts(31443, 31132)}),
    "docker-machines": lambda: ("dev", docker(False), {}),
    "aws-hosted": lambda: ("train", aws(True), {}),
    "aws-machines": lambda: ("train", aws(False), {}),
    "remote-two-hosts": lambda: ("onprem", remote(), {"lab": HostedControlPlanePorts(30500, 30501)}),
    "existing": lambda: ("shared", existing(), {}),
}


class _GoldenDumper(yaml.SafeDumper):
    """Multi-line strings (valuesTemplate) as readable `|` blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_GoldenDumper.add_representer(str, _represent_str)


def colony_ref(name: str) -> ColonyRef:
    return ColonyRef(name=name, namespace=NAMESPACE, uid=UID)


ALLOWED_INSTANCE_PROFILES = frozenset({CAPA_NODES_INSTANCE_PROFILE, "gpu-nodes"})
"""The golden operator's admin allows the aws-hosted case's own profile (COLONY_AWS_INSTANCE_PROFILES)."""


def render_case(case: str) -> RenderedColony:
    """Render one case, parsing its spec exactly as the operator does."""
    name, spec, ports = CASES[case]()
    parsed = ColonySpec.model_validate(spec)
    return render_colony(colony_ref(name), parsed, ports, aws_instance_profiles=ALLOWED_INSTANCE_PROFILES)


def as_document(rendered: RenderedColony) -> dict[str, Any]:
    """The rendered colony as plain data, for the golden file."""
    return {
        "problems": list(rendered.problems),
        "clusters": [
            {
                "clusterName": cluster.cluster_name,
                "provider": cluster.provider,
                "capiClusterName": cluster.capi_cluster_name,
                "kubeconfigSecret": cluster.kubeconfig_secret,
                "kubeconfigKey": cluster.kubeconfig_key,
                "hostedPorts": (
                    {"api": cluster.hosted_ports.api, "konnectivity": cluster.hosted_ports.konnectivity}
                    if cluster.hosted_ports
                    else None
                ),
                "problems": list(cluster.problems),
                "manifests": list(cluster.manifests),
            }
            for cluster in rendered.clusters
        ],
        "addons": list(rendered.addons),
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_colony_matches_golden_file(case: str) -> None:
    document = as_document(render_case(case))
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(
            f"# Rendered by tests/unit/test_render_golden.py (case {case!r}); "
            "regenerate with UPDATE_GOLDEN=1.\n"
            + yaml.dump(document, Dumper=_GoldenDumper, sort_keys=False, width=100)
        )
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    assert yaml.safe_load(path.read_text()) == document, (
        f"rendering changed for {case!r}; if intended, regenerate with UPDATE_GOLDEN=1 and review the diff"
    )


def test_every_golden_file_belongs_to_a_case() -> None:
    assert {path.stem for path in GOLDEN.glob("*.yaml")} == set(CASES)
