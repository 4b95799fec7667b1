"""Invalid manifests are rejected by the real API server at admission, naming the field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import KubectlError, LocalCluster
from tests.integration.conftest import EXAMPLES


def _example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return document


AWS_COLONY = _example("colony-aws.yaml")
DOCKER_COLONY = _example("colony-docker-ray.yaml")
DDPJOB = _example("ddpjob.yaml")
GPR: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "GPUProvisioningRequest",
    "metadata": {"name": "gpr"},
    "spec": {"gpuShape": "A100", "numberOfGPUNodes": 1, "numberOfGPUs": 2},
}

GPUQUEUE: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "GPUQueue",
    "metadata": {"name": "admission-queue"},
    "spec": {"namespaces": ["team-a"], "quotas": [{"gpuType": "A100", "nominal": 8}]},
}


WORKLOAD_DEFINITION: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "WorkloadDefinition",
    "metadata": {"name": "admission-definition"},
    "spec": {
        "target": {"group": "example.com", "version": "v1alpha1", "kind": "Trainer", "plural": "trainers"},
        "addon": "kuberay",
        "components": [{"name": "worker", "podTemplatePath": ".spec.template"}],
    },
}

PLACEMENT_POLICY: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "PlacementPolicy",
    "metadata": {"name": "admission-policy"},
    "spec": {"orderedColonies": ["on-prem", "team-b/cloud.gpus"], "queueName": "gold"},
}

CLUSTER_SCOPED = ("GPUQueue", "WorkloadDefinition", "PlacementPolicy")

TRAVERSAL = "../../kube-system/secrets/admin"
"""A Secret name that, put into a request path unquoted, reads another namespace's Secret."""


def _mutate(base: dict[str, Any], change: Any) -> dict[str, Any]:
    document = copy.deepcopy(base)
    change(document["spec"])
    return document


def _set(path: str, value: Any) -> Any:
    def change(spec: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        target: Any = spec
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is _DELETE:
            del target[leaf]
        else:
            target[leaf] = value

    return change


def _all(*changes: Any) -> Any:
    def change(spec: dict[str, Any]) -> None:
        for one in changes:
            one(spec)

    return change


_DELETE = object()
_AWS_CLUSTER = AWS_COLONY["spec"]["colonyClusters"][0]


def _existing(ref: dict[str, Any]) -> Any:
    """The colony's clusters replaced by one existing cluster with kubeconfig Secret `ref`."""
    return _set("colonyClusters", [{"clusterName": "existing", "existing": {"kubeconfigSecretRef": ref}}])


def _remote(ref: dict[str, Any]) -> Any:
    """The colony's clusters replaced by one on-prem host with SSH key Secret `ref`."""
    host = {"address": "10.0.0.5", "sshKeySecretRef": ref}
    return _set("colonyClusters", [{"clusterName": "onprem", "remote": {"hosts": [host]}}])


def _helm(**spec: Any) -> Any:
    """The colony's additionalDependencies replaced by one chart with these HelmChartProxy fields."""
    chart = {"repoURL": "https://charts.example.com", "chartName": "c", **spec}
    return _set("additionalDependencies", [{"name": "extra", "spec": chart}])


_HELM = "spec.additionalDependencies[0].spec"
_NO_ENV = "valuesTemplate may not call env, expandenv, getHostByName"


def _wandb_ref(ref: dict[str, Any]) -> Any:
    return _all(_set("wandbApiKey", _DELETE), _set("wandbApiKeySecretRef", ref))


# Names are names (issue 16, point 1): every name that reaches a request path or a label is checked
# with Kubernetes' rule for its kind; Secret references have no namespace field (same namespace only).
HOSTILE_NAMES = {
    "wandb-secret-traversal": (
        DDPJOB,
        _wandb_ref({"name": TRAVERSAL}),
        "spec.wandbApiKeySecretRef.name",
    ),
    "wandb-secret-other-namespace": (
        DDPJOB,
        _wandb_ref({"name": "wandb", "namespace": "kube-system"}),
        'unknown field "spec.wandbApiKeySecretRef.namespace"',
    ),
    "wandb-secret-key-with-slash": (
        DDPJOB,
        _wandb_ref({"name": "wandb", "key": "../value"}),
        "spec.wandbApiKeySecretRef.key",
    ),
    "kubeconfig-secret-traversal": (
        AWS_COLONY,
        _existing({"name": TRAVERSAL}),
        "spec.colonyClusters[0].existing.kubeconfigSecretRef.name",
    ),
    "kubeconfig-secret-dot-dot": (
        AWS_COLONY,
        _existing({"name": ".."}),
        "spec.colonyClusters[0].existing.kubeconfigSecretRef.name",
    ),
    "kubeconfig-secret-percent-encoded": (
        AWS_COLONY,
        _existing({"name": "%2e%2e"}),
        "spec.colonyClusters[0].existing.kubeconfigSecretRef.name",
    ),
    "kubeconfig-secret-other-namespace": (
        AWS_COLONY,
        _existing({"name": "kubeconfig", "namespace": "kube-system"}),
        'unknown field "spec.colonyClusters[0].existing.kubeconfigSecretRef.namespace"',
    ),
    "ssh-key-secret-query": (
        AWS_COLONY,
        _remote({"name": "key?watch=true"}),
        "spec.colonyClusters[0].remote.hosts[0].sshKeySecretRef.name",
    ),
    "ssh-key-secret-other-namespace": (
        AWS_COLONY,
        _remote({"name": "key", "namespace": "kube-system"}),
        'unknown field "spec.colonyClusters[0].remote.hosts[0].sshKeySecretRef.namespace"',
    ),
    "workload-dependency-traversal": (
        AWS_COLONY,
        _set("workloadDependencies", [{"name": "../x"}]),
        "spec.workloadDependencies[0].name",
    ),
    "helm-release-namespace-not-dns": (
        DOCKER_COLONY,
        _set(
            "additionalDependencies",
            [{"name": "extra", "spec": {"repoURL": "https://e.io", "chartName": "c", "namespace": "a/b"}}],
        ),
        "spec.additionalDependencies[0].spec.namespace",
    ),
    # G1: the HelmChartProxy fields CAAPH reads with its own ClusterRole are declared, checked and
    # same-namespace; nothing else passes through.
    "helm-credentials-other-namespace": (
        DOCKER_COLONY,
        _helm(credentials={"secret": {"name": "pull", "namespace": "kube-system"}, "key": "config.json"}),
        f'unknown field "{_HELM}.credentials.secret.namespace"',
    ),
    "helm-ca-secret-other-namespace": (
        DOCKER_COLONY,
        _helm(tlsConfig={"caSecret": {"name": "ca", "namespace": "kube-system"}}),
        f'unknown field "{_HELM}.tlsConfig.caSecret.namespace"',
    ),
    "helm-credentials-secret-traversal": (
        DOCKER_COLONY,
        _helm(credentials={"secret": {"name": TRAVERSAL}}),
        f"{_HELM}.credentials.secret.name",
    ),
    "helm-unknown-field": (
        DOCKER_COLONY,
        _helm(postRenderer={"exec": "/bin/sh"}),
        f'unknown field "{_HELM}.postRenderer"',
    ),
    "helm-repo-file": (DOCKER_COLONY, _helm(repoURL="file:///etc"), f"{_HELM}.repoURL"),
    "helm-repo-http-metadata": (
        DOCKER_COLONY,
        _helm(repoURL="http://169.254.169.254/latest/meta-data"),
        f"{_HELM}.repoURL",
    ),
    "helm-values-env": (
        DOCKER_COLONY,
        _helm(valuesTemplate='key: {{ env "AWS_SECRET_ACCESS_KEY" }}'),
        (f"{_HELM}.valuesTemplate", _NO_ENV),
    ),
    "helm-values-expandenv-in-a-pipeline": (
        DOCKER_COLONY,
        _helm(valuesTemplate='key: {{ "}}" | expandenv }}'),
        (f"{_HELM}.valuesTemplate", _NO_ENV),
    ),
    "helm-values-get-host-by-name": (
        DOCKER_COLONY,
        _helm(valuesTemplate='ip: {{ getHostByName "kubernetes.default" }}'),
        (f"{_HELM}.valuesTemplate", _NO_ENV),
    ),
    "target-colony-traversal": (DDPJOB, _set("targetColony", "../other"), "spec.targetColony"),
    "target-colony-uppercase": (DDPJOB, _set("targetColony", "Colony"), "spec.targetColony"),
    "volcano-queue-slash": (DDPJOB, _set("queue", "a/b"), "spec.queue"),
    "node-selector-not-a-label-value": (
        DDPJOB,
        _set("nodeSelector", {"nvidia.com/gpu.product": "a/b"}),
        "spec.nodeSelector.nvidia.com/gpu.product",
    ),
    "gpr-queue-traversal": (GPR, _set("queueName", "../gold"), "spec.queueName"),
    "gpr-colony-three-parts": (GPR, _set("colonies", ["a/b/c"]), "spec.colonies[0]"),
    "gpr-colony-traversal": (GPR, _set("colonies", ["ok", "../x"]), "spec.colonies[1]"),
    "gpr-selector-not-a-label-value": (
        GPR,
        _set("colonySelector", {"matchLabels": {"team": "a b"}}),
        "spec.colonySelector.matchLabels.team",
    ),
    "gpuqueue-namespace-not-dns": (GPUQUEUE, _set("namespaces", ["team_a"]), "spec.namespaces[0]"),
    "definition-group-traversal": (
        WORKLOAD_DEFINITION,
        _set("target.group", "../../api/v1"),
        "spec.target.group",
    ),
    "definition-plural-slash": (WORKLOAD_DEFINITION, _set("target.plural", "a/b"), "spec.target.plural"),
    "policy-colony-traversal": (
        PLACEMENT_POLICY,
        _set("orderedColonies", ["../../x"]),
        "spec.orderedColonies[0]",
    ),
    "policy-queue-slash": (PLACEMENT_POLICY, _set("queueName", "a/b"), "spec.queueName"),
}

# Admission gaps (issue 16, point 7).
GAPS = {
    "gpr-empty-gpu-shape": (GPR, _set("gpuShape", ""), "spec.gpuShape"),
    "gpr-gpu-shape-list": (GPR, _set("gpuShape", "A100,H100"), "spec.gpuShape"),
    "gpr-empty-gpu-shapes-item": (
        GPR,
        _all(_set("gpuShape", _DELETE), _set("gpuShapes", ["A100", ""])),
        "spec.gpuShapes[1]",
    ),
    "gpr-gpu-shapes-item-list": (
        GPR,
        _all(_set("gpuShape", _DELETE), _set("gpuShapes", ["A100, H100"])),
        "spec.gpuShapes[0]",
    ),
    "ddpjob-gpu-types-item-list": (DDPJOB, _set("gpuTypes", ["A100,H100"]), "spec.gpuTypes[0]"),
    "ddpjob-empty-gpu-type": (DDPJOB, _set("gpuTypes", [""]), "spec.gpuTypes[0]"),
    "gpuqueue-gpu-type-list": (
        GPUQUEUE,
        _set("quotas", [{"gpuType": "A100,H100", "nominal": 1}]),
        "spec.quotas[0].gpuType",
    ),
    "gpuqueue-borrowing-limit-without-cohort": (
        GPUQUEUE,
        _set("quotas", [{"gpuType": "A100", "nominal": 8, "borrowingLimit": 4}]),
        ("spec: Invalid value", "quotas[].borrowingLimit needs a cohort"),
    ),
    "gpuqueue-borrowing-limit-with-empty-cohort": (
        GPUQUEUE,
        _all(_set("cohort", ""), _set("quotas", [{"gpuType": "A100", "nominal": 8, "borrowingLimit": 4}])),
        "quotas[].borrowingLimit needs a cohort",
    ),
    "ddpjob-env-value-and-value-from": (
        DDPJOB,
        _set("env", [{"name": "A", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
        ("spec.env[0]", "set either value or valueFrom, not both"),
    ),
}

INVALID = {
    "ddpjob-parallelism-zero": (DDPJOB, _set("parallelism", 0), "spec.parallelism"),
    "ddpjob-negative-nproc": (DDPJOB, _set("nprocPerNode", -1), "spec.nprocPerNode"),
    "ddpjob-missing-image": (DDPJOB, _set("image", _DELETE), "spec.image"),
    "ddpjob-empty-script": (DDPJOB, _set("scriptPath", ""), "spec.scriptPath"),
    "ddpjob-two-wandb-keys": (
        DDPJOB,
        _set("wandbApiKeySecretRef", {"name": "wandb"}),
        "set either wandbApiKey or wandbApiKeySecretRef",
    ),
    "ddpjob-unknown-gang-scheduler": (DDPJOB, _set("gangScheduler", "kueue"), "spec.gangScheduler"),
    "ddpjob-negative-backoff": (DDPJOB, _set("backoffLimit", -1), "spec.backoffLimit"),
    "ddpjob-bad-toleration": (
        DDPJOB,
        _set("tolerations", [{"key": "gpu", "operator": "In"}]),
        "spec.tolerations[0].operator",
    ),
    "ddpjob-env-without-name": (DDPJOB, _set("env", [{"value": "1"}]), "spec.env[0].name"),
    "colony-no-clusters": (AWS_COLONY, _set("colonyClusters", []), "spec.colonyClusters"),
    "colony-missing-clusters": (AWS_COLONY, _set("colonyClusters", _DELETE), "spec.colonyClusters"),
    "colony-bad-k8s-version": (AWS_COLONY, _set("k8sVersion", "1.30"), "spec.k8sVersion"),
    "aws-without-region": (AWS_COLONY, _set("colonyClusters.0.aws.region", _DELETE), "aws.region"),
    "aws-without-instance-type": (
        AWS_COLONY,
        _set("colonyClusters.0.aws.instanceType", _DELETE),
        "aws.instanceType",
    ),
    "duplicate-cluster-names": (
        AWS_COLONY,
        _set("colonyClusters", [_AWS_CLUSTER, _AWS_CLUSTER]),
        "spec.colonyClusters[1]: Duplicate value",
    ),
    "unknown-provider-block": (
        DOCKER_COLONY,
        _set("colonyClusters.0.gcp", {"replicas": 1}),
        'unknown field "spec.colonyClusters[0].gcp"',
    ),
    "no-provider-block": (
        DOCKER_COLONY,
        _set("colonyClusters", [{"clusterName": "empty"}]),
        "exactly one provider block",
    ),
    "two-provider-blocks": (
        DOCKER_COLONY,
        _set("colonyClusters.0.aws", _AWS_CLUSTER["aws"]),
        "exactly one provider block",
    ),
    "enabled-flag-without-block": (
        DOCKER_COLONY,
        _set("colonyClusters.0.awsEnabled", True),
        "awsEnabled must agree with the presence of the aws block",
    ),
    "negative-replicas": (
        DOCKER_COLONY,
        _set("colonyClusters.0.docker.replicas", -1),
        "spec.colonyClusters[0].docker.replicas",
    ),
    "cluster-name-not-dns": (
        DOCKER_COLONY,
        _set("colonyClusters.0.clusterName", "Docker_1"),
        "spec.colonyClusters[0].clusterName",
    ),
    "gpr-zero-gpus": (GPR, _set("numberOfGPUs", 0), "spec.numberOfGPUs"),
    "gpr-zero-nodes": (GPR, _set("numberOfGPUNodes", 0), "spec.numberOfGPUNodes"),
    "gpr-no-gpu-type": (GPR, _set("gpuShape", _DELETE), "name the GPU type"),
    "gpr-priority-out-of-range": (GPR, _set("priority", 500), "spec.priority"),
    "gpr-bad-duration": (GPR, _set("exitDuration", "forever"), "spec.exitDuration"),
    "gpuqueue-negative-nominal": (
        GPUQUEUE,
        _set("quotas", [{"gpuType": "A100", "nominal": -1}]),
        "spec.quotas[0].nominal",
    ),
    "gpuqueue-no-quotas": (GPUQUEUE, _set("quotas", []), "spec.quotas"),
    "gpuqueue-duplicate-type": (
        GPUQUEUE,
        _set("quotas", [{"gpuType": "A100", "nominal": 1}, {"gpuType": "A100", "nominal": 2}]),
        "Duplicate value",
    ),
    **HOSTILE_NAMES,
    **GAPS,
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_manifest_is_rejected_naming_the_field(
    management: LocalCluster, namespace: str, case: str
) -> None:
    base, change, expected = INVALID[case]
    document = _mutate(base, change)
    with pytest.raises(KubectlError) as rejected:
        management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(document))
    for part in expected if isinstance(expected, tuple) else (expected,):
        assert part in rejected.value.stderr, rejected.value.stderr
    # Nothing was stored.
    kind = document["kind"].lower()
    listed = management.get_json(kind, "-n", namespace)["items"]
    assert [i for i in listed if i["metadata"]["name"] == document["metadata"]["name"]] == []


def test_extension_fields_are_accepted(management: LocalCluster, namespace: str) -> None:
    """The DDPJob extension fields users expect, with int-or-string quantities."""
    job = copy.deepcopy(DDPJOB)
    job["spec"] |= {
        "env": [
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
        "resources": {"requests": {"cpu": 4, "memory": "32Gi"}, "limits": {"memory": "64Gi"}},
        "backoffLimit": 2,
        "ttlSecondsAfterFinished": 60,
        "activeDeadlineSeconds": 3600,
        "gangScheduler": "default",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(job))
    stored = management.get_json("ddpjob", "test-ddp-job", "-n", namespace)["spec"]
    assert stored["resources"]["requests"]["cpu"] == 4
    assert stored["env"][1]["valueFrom"] == {"secretKeyRef": {"name": "s", "key": "k"}}
    assert stored["queue"] == "default"  # defaulted


def test_there_are_at_least_twelve_invalid_cases() -> None:
    assert len(INVALID) >= 12


BASES = [AWS_COLONY, DOCKER_COLONY, DDPJOB, GPR, GPUQUEUE, WORKLOAD_DEFINITION, PLACEMENT_POLICY]


def _accepted(management: LocalCluster, namespace: str, document: dict[str, Any]) -> dict[str, Any]:
    """Apply `document` (it must pass admission) and return it as stored; cluster-scoped ones are
    deleted again (no namespace takes them away)."""
    kind, name = document["kind"].lower(), document["metadata"]["name"]
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(document))
    stored: dict[str, Any] = management.get_json(kind, name, "-n", namespace)
    if document["kind"] in CLUSTER_SCOPED:
        management.kubectl("delete", kind, name)
    return stored


@pytest.mark.parametrize("base", BASES, ids=lambda d: d["kind"])
def test_unmutated_bases_are_accepted(management: LocalCluster, namespace: str, base: dict[str, Any]) -> None:
    """The controls: the same documents without the mutation pass admission."""
    _accepted(management, namespace, base)


# What stays valid next to the hostile cases: names with dots, `*`, GPU types with spaces, keys
# with dots and underscores, borrowing inside a cohort, an env var from a Secret, shared colonies.
VALID = {
    "gpr-any-gpu-type": (GPR, _all(_set("gpuShape", _DELETE), _set("gpuShapes", ["*"]))),
    "gpr-several-gpu-types": (
        GPR,
        _all(_set("gpuShape", _DELETE), _set("gpuShapes", ["A100-80GB", "a100 80gb"])),
    ),
    "gpr-names": (
        GPR,
        _all(
            _set("queueName", "gold.team-a"),
            _set("colonies", ["local", "team-b/shared.gpus"]),
            _set("colonySelector", {"matchLabels": {"example.com/tier": "on-prem_1.a", "empty": ""}}),
        ),
    ),
    "ddpjob-names": (
        DDPJOB,
        _all(
            _wandb_ref({"name": "wandb.keys", "key": "api_key.v1"}),
            _set("targetColony", "test-colony.gpus"),
            _set("queue", "research.high"),
            _set("gpuTypes", ["H100", "*"]),
            _set("env", [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
        ),
    ),
    "ddpjob-management-cluster": (DDPJOB, _set("targetColony", "")),
    "existing-cluster": (AWS_COLONY, _existing({"name": "prod-cluster.kubeconfig", "key": "config.yaml"})),
    "on-prem-host": (AWS_COLONY, _remote({"name": "ssh-key"})),
    "gpuqueue-borrowing-in-cohort": (
        GPUQUEUE,
        _all(
            _set("cohort", "research"),
            _set("quotas", [{"gpuType": "A100", "nominal": 8, "borrowingLimit": 4}]),
        ),
    ),
    "gpuqueue-any-type": (GPUQUEUE, _set("quotas", [{"gpuType": "*", "nominal": 8}])),
    "helm-private-registry-and-template": (
        DOCKER_COLONY,
        _helm(
            repoURL="oci://registry.example.com/charts",
            credentials={"secret": {"name": "pull.secret"}, "key": "config.json"},
            tlsConfig={"caSecret": {"name": "registry-ca"}, "insecureSkipTLSVerify": False},
            reconcileStrategy="InstallOnce",
            valuesTemplate=(
                "env:\n  - name: CLUSTER\n    value: {{ .Cluster.metadata.name }}\n"
                'note: {{ "env" }} {{ $env := 1 }}{{ $env }} {{ .Cluster.spec.env }}\n'
            ),
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_names_and_gpu_types_are_accepted(
    management: LocalCluster, unwatched_namespace: str, case: str
) -> None:
    base, change = VALID[case]
    document = _mutate(base, change)
    stored = _accepted(management, unwatched_namespace, document)
    assert _kept(document["spec"], stored["spec"]), stored["spec"]


def _kept(written: Any, stored: Any) -> bool:
    """Whether everything written was stored as written (the API server only added defaults)."""
    if isinstance(written, dict):
        return isinstance(stored, dict) and all(
            k in stored and _kept(v, stored[k]) for k, v in written.items()
        )
    if isinstance(written, list):
        return isinstance(stored, list) and len(written) == len(stored) and all(map(_kept, written, stored))
    return bool(written == stored)


def test_a_secret_namespace_never_survives_a_lax_client(
    management: LocalCluster, unwatched_namespace: str
) -> None:
    """A client that skips strict field validation (kubectl --validate=false, most libraries) gets
    the namespace field pruned: the stored reference can only mean the job's own namespace."""
    document = _mutate(DDPJOB, _wandb_ref({"name": "wandb", "namespace": "kube-system"}))
    management.kubectl(
        "apply", "--validate=false", "-n", unwatched_namespace, "-f", "-", input_text=json.dumps(document)
    )
    stored = management.get_json("ddpjob", document["metadata"]["name"], "-n", unwatched_namespace)
    assert stored["spec"]["wandbApiKeySecretRef"] == {"name": "wandb", "key": "value"}


def test_a_helm_secret_namespace_never_survives_a_lax_client(
    management: LocalCluster, unwatched_namespace: str
) -> None:
    """The same for the Secrets CAAPH reads for a colony: without strict field validation the
    namespace fields are pruned, so CAAPH defaults them to the colony's own namespace."""
    change = _helm(
        credentials={"secret": {"name": "pull", "namespace": "kube-system"}},
        tlsConfig={"caSecret": {"name": "ca", "namespace": "kube-system"}},
        postRenderer={"exec": "/bin/sh"},
    )
    document = _mutate(DOCKER_COLONY, change)
    management.kubectl(
        "apply", "--validate=false", "-n", unwatched_namespace, "-f", "-", input_text=json.dumps(document)
    )
    stored = management.get_json("colony", document["metadata"]["name"], "-n", unwatched_namespace)
    (dependency,) = stored["spec"]["additionalDependencies"]
    assert dependency["spec"]["credentials"] == {"secret": {"name": "pull"}}
    assert dependency["spec"]["tlsConfig"] == {"caSecret": {"name": "ca"}}
    assert "postRenderer" not in dependency["spec"]


@pytest.mark.parametrize("base", [DOCKER_COLONY, DDPJOB], ids=lambda d: d["kind"])
def test_names_that_become_label_values_have_at_most_63_characters(
    management: LocalCluster, unwatched_namespace: str, base: dict[str, Any]
) -> None:
    """A Colony's name is the colony label of its clusters and add-ons, a DDPJob's the job-name
    label of its pods: both are bounded at admission (issue 16, G3), 63 still fits."""
    too_long = copy.deepcopy(base)
    too_long["metadata"]["name"] = "n" * 64
    with pytest.raises(KubectlError) as rejected:
        management.kubectl("apply", "-n", unwatched_namespace, "-f", "-", input_text=json.dumps(too_long))
    assert "metadata.name may have at most 63 characters" in rejected.value.stderr, rejected.value.stderr
    fits = copy.deepcopy(base)
    fits["metadata"]["name"] = "n" * 63
    assert _accepted(management, unwatched_namespace, fits)["metadata"]["name"] == "n" * 63
