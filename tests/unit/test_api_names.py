"""Every tenant-written name that reaches a request path or a label carries Kubernetes' rule for its
kind in the generated CRD schema (the API server enforces it at admission; the operator's pydantic
models apply the same rule when they parse an object)."""

from __future__ import annotations

from typing import Any

import pytest

from colony.api import COLONY, DDPJOB, GPR, GPUQUEUE, PLACEMENT_POLICY, WORKLOAD_DEFINITION
from colony.api.base import (
    COLONY_REFERENCE_PATTERN,
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    GPU_TYPE_PATTERN,
    LABEL_VALUE_PATTERN,
    SECRET_KEY_PATTERN,
    ResourceDefinition,
    SecretKeyReference,
)
from colony.api.colony import (
    FORBIDDEN_TEMPLATE_CALL_PATTERN,
    HELM_REPO_URL_PATTERN,
    AdditionalDependency,
    HelmChartProxySpec,
)
from colony.api.crdgen import crd_for
from colony.api.ddpjob import EnvVar
from colony.api.gpr import GPRSpec
from colony.api.gpuqueue import GPUQueueSpec

_OPTIONAL_SUBDOMAIN = "^$|" + DNS_SUBDOMAIN_PATTERN

# (resource, path in the spec schema, pattern, maxLength): `[]` steps into list items, `{}` into
# map values.
GUARDED: list[tuple[ResourceDefinition, str, str, int]] = [
    (COLONY, "colonyClusters[].clusterName", DNS_LABEL_PATTERN, 40),
    (COLONY, "colonyClusters[].existing.kubeconfigSecretRef.name", DNS_SUBDOMAIN_PATTERN, 253),
    (COLONY, "colonyClusters[].existing.kubeconfigSecretRef.key", SECRET_KEY_PATTERN, 253),
    (COLONY, "colonyClusters[].remote.hosts[].sshKeySecretRef.name", DNS_SUBDOMAIN_PATTERN, 253),
    (COLONY, "colonyClusters[].remote.hosts[].sshKeySecretRef.key", SECRET_KEY_PATTERN, 253),
    (COLONY, "workloadDependencies[].name", DNS_LABEL_PATTERN, 63),
    (COLONY, "additionalDependencies[].name", DNS_LABEL_PATTERN, 63),
    (COLONY, "additionalDependencies[].spec.releaseName", DNS_SUBDOMAIN_PATTERN, 53),
    (COLONY, "additionalDependencies[].spec.namespace", DNS_LABEL_PATTERN, 63),
    (COLONY, "additionalDependencies[].spec.clusterSelector.matchLabels{}", LABEL_VALUE_PATTERN, 63),
    (COLONY, "additionalDependencies[].spec.repoURL", HELM_REPO_URL_PATTERN, 512),
    (COLONY, "additionalDependencies[].spec.credentials.secret.name", DNS_SUBDOMAIN_PATTERN, 253),
    (COLONY, "additionalDependencies[].spec.credentials.key", SECRET_KEY_PATTERN, 253),
    (COLONY, "additionalDependencies[].spec.tlsConfig.caSecret.name", DNS_SUBDOMAIN_PATTERN, 253),
    (DDPJOB, "targetColony", _OPTIONAL_SUBDOMAIN, 63),
    (DDPJOB, "wandbApiKeySecretRef.name", DNS_SUBDOMAIN_PATTERN, 253),
    (DDPJOB, "wandbApiKeySecretRef.key", SECRET_KEY_PATTERN, 253),
    (DDPJOB, "gpuTypes[]", GPU_TYPE_PATTERN, 63),
    (DDPJOB, "queue", DNS_SUBDOMAIN_PATTERN, 253),
    (DDPJOB, "nodeSelector{}", LABEL_VALUE_PATTERN, 63),
    (GPR, "gpuShape", GPU_TYPE_PATTERN, 63),
    (GPR, "gpuShapes[]", GPU_TYPE_PATTERN, 63),
    (GPR, "queueName", DNS_SUBDOMAIN_PATTERN, 253),
    (GPR, "colonies[]", COLONY_REFERENCE_PATTERN, 317),
    (GPR, "colonySelector.matchLabels{}", LABEL_VALUE_PATTERN, 63),
    (GPUQUEUE, "namespaces[]", DNS_LABEL_PATTERN, 63),
    (GPUQUEUE, "quotas[].gpuType", GPU_TYPE_PATTERN, 63),
    (PLACEMENT_POLICY, "orderedColonies[]", COLONY_REFERENCE_PATTERN, 317),
    (PLACEMENT_POLICY, "queueName", DNS_SUBDOMAIN_PATTERN, 253),
    (PLACEMENT_POLICY, "colonySelector.matchLabels{}", LABEL_VALUE_PATTERN, 63),
    (PLACEMENT_POLICY, "resourceSelector.matchLabels{}", LABEL_VALUE_PATTERN, 63),
    (WORKLOAD_DEFINITION, "target.group", DNS_SUBDOMAIN_PATTERN, 253),
    (WORKLOAD_DEFINITION, "target.version", DNS_LABEL_PATTERN, 63),
    (WORKLOAD_DEFINITION, "target.plural", DNS_LABEL_PATTERN, 63),
    (WORKLOAD_DEFINITION, "addon", DNS_LABEL_PATTERN, 63),
]


def _field(resource: ResourceDefinition, path: str) -> dict[str, Any]:
    node: dict[str, Any] = crd_for(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    node = node["properties"]["spec"]
    for step in path.split("."):
        name = step.rstrip("[]{}")
        node = node["properties"][name]
        for suffix in step[len(name) :]:
            node = node["items"] if suffix == "]" else node["additionalProperties"] if suffix == "}" else node
    return node


@pytest.mark.parametrize("resource, path, pattern, max_length", GUARDED, ids=lambda v: str(v)[:50])
def test_guarded_field_carries_its_rule_in_the_crd(
    resource: ResourceDefinition, path: str, pattern: str, max_length: int
) -> None:
    field = _field(resource, path)
    assert field["pattern"] == pattern
    assert field["maxLength"] == max_length


def test_secret_references_have_no_namespace_field() -> None:
    assert set(SecretKeyReference.model_fields) == {"name", "key"}
    for resource, path in (
        (COLONY, "colonyClusters[].existing.kubeconfigSecretRef"),
        (COLONY, "colonyClusters[].remote.hosts[].sshKeySecretRef"),
        (DDPJOB, "wandbApiKeySecretRef"),
    ):
        assert set(_field(resource, path)["properties"]) == {"name", "key"}
    for path in (
        "additionalDependencies[].spec.credentials.secret",
        "additionalDependencies[].spec.tlsConfig.caSecret",
    ):
        assert set(_field(COLONY, path)["properties"]) == {"name"}


def test_helm_chart_proxy_spec_declares_every_field_it_passes_on() -> None:
    """No pass-through: the API server rejects (strict) or prunes (lax clients) anything else, and
    the model drops it, so a field CAAPH reads can only reach it through a declared, checked field."""
    spec = _field(COLONY, "additionalDependencies[].spec")
    assert "x-kubernetes-preserve-unknown-fields" not in spec
    assert set(spec["properties"]) == {
        "clusterSelector",
        "repoURL",
        "chartName",
        "version",
        "releaseName",
        "namespace",
        "valuesTemplate",
        "reconcileStrategy",
        "options",
        "credentials",
        "tlsConfig",
    }
    template = spec["properties"]["valuesTemplate"]
    assert template["maxLength"] == 16384
    (rule,) = template["x-kubernetes-validations"]
    assert rule["rule"] == f"!self.matches(r'{FORBIDDEN_TEMPLATE_CALL_PATTERN}')"
    assert "'" not in FORBIDDEN_TEMPLATE_CALL_PATTERN  # it sits in a raw single-quoted CEL string


def test_a_secret_namespace_in_a_helm_chart_proxy_spec_is_dropped_by_the_model() -> None:
    parsed = HelmChartProxySpec.model_validate(
        {
            "repoURL": "oci://registry.example.com/charts",
            "chartName": "c",
            "credentials": {"secret": {"name": "pull", "namespace": "kube-system"}, "key": "config.json"},
            "tlsConfig": {"caSecret": {"name": "ca", "namespace": "kube-system"}},
            "insecureSkipTlsVerify": True,
            "postRenderer": {"exec": "/bin/sh"},
        }
    )
    wire = parsed.to_wire()
    assert wire["credentials"] == {"secret": {"name": "pull"}, "key": "config.json"}
    assert wire["tlsConfig"] == {"caSecret": {"name": "ca"}}
    assert parsed.model_extra is None and "postRenderer" not in wire


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data",
        "http://charts.example.com",
        "ftp://x",
        "/var/run/secrets",
        "--kubeconfig=/x",
        "https://user:pw@host",
        "https://host/?q=1",
        "https://",
    ],
)
def test_hostile_repo_urls_are_refused_by_the_model(url: str) -> None:
    with pytest.raises(ValueError, match="repoURL"):
        AdditionalDependency.model_validate({"name": "x", "spec": {"repoURL": url, "chartName": "c"}})


@pytest.mark.parametrize(
    "url",
    [
        "https://charts.example.com",
        "https://ray-project.github.io/kuberay-helm/",
        "oci://ghcr.io/kubeflow/charts",
    ],
)
def test_https_and_oci_repo_urls_are_kept(url: str) -> None:
    parsed = AdditionalDependency.model_validate({"name": "x", "spec": {"repoURL": url, "chartName": "c"}})
    assert parsed.spec.repo_url == url


@pytest.mark.parametrize(
    "name", ["../../other-ns/secrets/x", "..", ".", "", "%2e%2e", "a/b", "x?y", "x#y", "UPPER", "-a", "a-"]
)
def test_hostile_secret_names_are_refused_by_the_model(name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        SecretKeyReference(name=name)


@pytest.mark.parametrize("name", ["wandb", "wandb.keys", "a", "team-a.kubeconfig-1", "x" * 253])
def test_valid_secret_names_are_kept(name: str) -> None:
    assert SecretKeyReference(name=name, key="api_key.v1-2").name == name


@pytest.mark.parametrize("shape", ["", "A100,H100", "A100, H100", ",", " A100", "*A100"])
def test_gpu_shape_is_one_type(shape: str) -> None:
    with pytest.raises(ValueError, match="gpu"):
        GPRSpec.model_validate({"gpuShape": shape, "numberOfGPUs": 1})
    with pytest.raises(ValueError, match="gpuShapes"):
        GPRSpec.model_validate({"gpuShapes": ["A100", shape], "numberOfGPUs": 1})


@pytest.mark.parametrize("shapes", [["*"], ["A100-80GB", "a100 80gb"], ["NVIDIA-H100-80GB-HBM3", "H100"]])
def test_valid_gpu_shapes_are_kept(shapes: list[str]) -> None:
    assert GPRSpec.model_validate({"gpuShapes": shapes, "numberOfGPUs": 1}).gpu_shapes == shapes


def test_cel_rules_of_the_admission_gaps_are_in_the_crds() -> None:
    queue_rules = GPUQueueSpec.model_json_schema()["x-kubernetes-validations"]
    assert any("borrowingLimit" in rule["rule"] and "cohort" in rule["rule"] for rule in queue_rules)
    env_rules = EnvVar.model_json_schema()["x-kubernetes-validations"]
    assert env_rules == [
        {
            "rule": "!(has(self.value) && has(self.valueFrom))",
            "message": "set either value or valueFrom, not both",
        }
    ]
    assert _field(DDPJOB, "env[]")["x-kubernetes-validations"] == env_rules
    spec = crd_for(GPUQUEUE)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"] == queue_rules


def test_kinds_whose_name_becomes_a_label_value_bound_it_at_admission() -> None:
    for resource in (COLONY, DDPJOB):
        root = crd_for(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        (rule,) = root["x-kubernetes-validations"]
        assert rule["rule"] == "size(self.metadata.name) <= 63"
