"""The chart's RBAC is exactly what the operator uses, proven with an API server audit log.

A management API server of this test's own writes an audit log (Metadata level) of every request of
the chart's ServiceAccount. The chart's CRDs (its files/crds/) and RBAC (`helm template`, applied with
kubectl) are installed; the operator runs with the Deployment's own arguments and environment and a kubeconfig
holding a token of that ServiceAccount (TokenRequest), and goes through lifecycles that touch every
code path that talks to the management cluster:

- a Colony with an AWS, a Docker and a remote (SSH hosts) cluster, hosted control planes and a
  catalog add-on, and the colony provisioned for a GPR (control plane on its machines): together they
  apply every Cluster API kind the operator renders, observe it and, when they are torn down, delete it;
- DDPJobs: one on the colony (plain W&B key moved into a Secret, ttlSecondsAfterFinished 0: the job
  is deleted and the ephemeral colony torn down), one asking for gpuTypes (the operator creates its
  GPR, runs on the reservation, deletes the GPR), one on the management cluster itself (Service,
  PodGroup, pods there; its moved W&B Secret is owned by it; deleted by the user);
- GPRs: admission against a GPUQueue, and auto-provisioning of an AWS colony that is torn down when
  the request is deleted;
- placement: a WorkloadDefinition and a PlacementPolicy (their status written), a PyTorchJob placed
  on the colony through its GPR, its status mirrored back, its GPR released and its copy deleted with
  it (the chart's `placement.kinds` narrowed to PyTorchJob, so that every kind granted is used);
- the GPU offer catalog read from the ConfigMap the chart names.

Then: no request of the ServiceAccount was denied (no 403 in the audit log, no Forbidden in the
operator's log), every (apiGroup, resource[/subresource], verb) it used is granted, and every granted
one was used. Requests to colony clusters use their own kubeconfigs and go to other API servers.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import colony
from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import MANAGEMENT_UPSTREAM, start_colony_cluster, upstream_crd_files
from colony.devenv.kwok import EXIT_CODE_ANNOTATION, OUTCOME_ANNOTATION
from colony.devenv.process import ManagedProcess, free_port
from colony.devenv.tools import Tools
from tests.integration.conftest import eventually
from tests.integration.test_chart import CHART, render
from tests.integration.test_expression_bounds import webhook_certificates

OFFERS_CONFIGMAP = "gpu-offers"

# Every request of a ServiceAccount (only the operator's run here: no controller-manager).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""


@dataclass(frozen=True)
class Install:
    """One way to install the chart; each its own release, namespaces and ServiceAccount."""

    release: str
    """Contains the chart name, so every object of the release is named after it."""
    release_namespace: str
    namespace: str
    """Where the lifecycle's objects live."""
    values: tuple[str, ...]

    @property
    def service_account(self) -> str:
        return f"system:serviceaccount:{self.release_namespace}:{self.release}"


INSTALLS = {
    # watchNamespaces empty: one ClusterRole.
    "cluster-wide": Install("colony-operator", "colony-system", "audit-all", ()),
    # watchNamespaces with an exact name: a Role there, a ClusterRole for what cannot be namespaced.
    "namespaced": Install(
        "colony-operator-ns", "colony-ns-system", "audit-ns", ("--set", "watchNamespaces={audit-ns}")
    ),
}

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

Permission = tuple[str, str, str]
"""(apiGroup, resource or resource/subresource, verb)."""

UNUSED_ALLOWED: dict[Permission, str] = {}
"""Granted permissions the lifecycle may leave unused, each with the reason. Empty on purpose: the
lifecycle reaches every rule."""


@pytest.fixture(scope="module")
def audited(tools: Tools) -> Iterator[LocalCluster]:
    """A management API server (no scheduler, no controllers: nothing else writes) with an audit log
    of the operator's ServiceAccount, and every CRD the operator renders against."""
    cluster = LocalCluster(
        "audited", tools, scheduler=False, controller_manager=False, kwok=False, audit_policy=AUDIT_POLICY
    )
    cluster.start()
    try:
        cluster.install_crds(
            sorted((CHART / "files" / "crds").glob("*.yaml")) + upstream_crd_files(tools, MANAGEMENT_UPSTREAM)
        )
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def audit_colony(tools: Tools) -> Iterator[LocalCluster]:
    """This test's own colony cluster (kwok GPU nodes, Volcano): GPU reservations stay here."""
    cluster = start_colony_cluster(tools, "audit-colony")
    try:
        yield cluster
    finally:
        cluster.stop()


# -- the chart's side ------------------------------------------------------------------------------


def _chart(tools: Tools, install: Install) -> list[dict[str, Any]]:
    return render(
        tools,
        install.release_namespace,
        "--set",
        f"offersCatalogConfigMap={OFFERS_CONFIGMAP}",
        "--set",
        "placement.kinds={pytorchjobs.kubeflow.org}",
        *install.values,
        release=install.release,
    )


def granted(docs: list[dict[str, Any]]) -> set[Permission]:
    """Every (apiGroup, resource, verb) the chart's (Cluster)Roles grant."""
    permissions: set[Permission] = set()
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        if (doc.get("metadata") or {}).get("labels", {}).get("app.kubernetes.io/component") == "tenant-role":
            continue  # the aggregated editor/viewer roles of tenants, not the operator's
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    permissions |= {(group, resource, verb) for verb in rule["verbs"]}
    return permissions


def _operator_kubeconfig(cluster: LocalCluster, token: str) -> str:
    """The admin kubeconfig with its user replaced by the ServiceAccount's token."""
    config = yaml.safe_load(cluster.kubeconfig())
    config["users"] = [{"name": "operator", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "operator"
    return yaml.safe_dump(config)


def _start_operator(docs: list[dict[str, Any]], kubeconfig: Path, log: Path) -> ManagedProcess:
    """`colony operator` with the arguments and environment of the chart's Deployment (ports moved to
    free ones), as the chart's ServiceAccount."""
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = []
    for arg in container["args"]:
        if arg.startswith("--liveness="):
            arg = f"--liveness=http://127.0.0.1:{free_port()}/healthz"
        elif arg.startswith("--metrics-port="):
            arg = f"--metrics-port={free_port()}"
        elif arg.startswith("--webhook-port="):
            arg = f"--webhook-port={free_port()}"
        elif arg.startswith("--webhook-cert-dir="):  # the chart's Secret, played by a local CA
            webhook_certificates(log.parent)
            arg = f"--webhook-cert-dir={log.parent}"
        args.append(arg)
    env = {
        **os.environ,
        **{e["name"]: e["value"] for e in container.get("env", [])},
        "KUBECONFIG": str(kubeconfig),
        "COLONY_COST_REFRESH_SECONDS": "2",
    }
    env.pop("TMPDIR", None)  # the container's /tmp; here the host's default
    process = ManagedProcess("operator", [sys.executable, "-m", "colony", "operator", *args], log, env=env)
    process.start()
    try:
        process.wait_until(lambda: "Initial authentication has finished" in log.read_text(), 60, "a login")
    except BaseException:
        process.stop()
        raise
    return process


# -- the lifecycle ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Objects:
    """Objects of one namespace of one cluster."""

    cluster: LocalCluster
    namespace: str

    def apply(self, *documents: dict[str, Any]) -> None:
        for document in documents:
            document["metadata"].setdefault("namespace", self.namespace)
        self.cluster.apply(documents, server_side=False)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self.cluster.kubectl("get", kind, name, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def phase(self, kind: str, name: str) -> str | None:
        return ((self.get(kind, name) or {}).get("status") or {}).get("phase")

    def gone(self, kind: str, name: str) -> bool:
        return self.get(kind, name) is None

    def delete(self, kind: str, name: str) -> None:
        self.cluster.kubectl("delete", kind, name, "-n", self.namespace, "--wait=false")

    def running_pods(self, job: str) -> list[str]:
        selector = f"training.exalsius.ai/job-name={job}"
        pods = self.cluster.get_json("pods", "-n", self.namespace, "-l", selector)["items"]
        return [p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Running"]


def _fleet() -> dict[str, Any]:
    """One cluster per provider kind with hosted control planes (remote hosts need them); the
    colony provisioned for a GPR has its control plane on its machines: together they apply every
    Cluster API kind the operator renders."""
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": "fleet", "labels": {"colony.exalsius.ai/ephemeral": "true"}},
        "spec": {
            "k8sVersion": "v1.36.3",
            "workloadDependencies": [{"name": "volcano-sh"}],
            "hostedControlPlaneEnabled": True,
            "colonyClusters": [
                {
                    "clusterName": "aws-1",
                    "aws": {"replicas": 1, "region": "us-east-1", "instanceType": "g5.xlarge"},
                },
                {"clusterName": "docker-1", "docker": {"replicas": 1}},
                {
                    "clusterName": "remote-1",
                    "remote": {"hosts": [{"address": "10.0.0.5", "sshKeySecretRef": {"name": "ssh-key"}}]},
                },
            ],
        },
    }


def _job(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {"name": name},
        "spec": {"parallelism": 1, "nprocPerNode": 1, "image": "busybox", "scriptPath": "/train.py", **spec},
    }


def _finish_workers(workers: Objects, job: str) -> None:
    """Let the job's (kwok) worker pods succeed."""
    for pod in eventually(lambda: workers.running_pods(job), 60):
        workers.cluster.kubectl(
            "annotate",
            "pod",
            pod,
            "-n",
            workers.namespace,
            f"{OUTCOME_ANNOTATION}=Succeeded",
            f"{EXIT_CODE_ANNOTATION}=0",
        )


def _lifecycle(management: Objects, workers: Objects) -> None:
    """Colony, DDPJob and GPR lifecycles in `management.namespace`; workers of jobs on the colony
    run in `workers` (the colony cluster)."""
    queue = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUQueue",
        "metadata": {"name": management.namespace},
        "spec": {"namespaces": [management.namespace], "quotas": [{"gpuType": "*", "nominal": 64}]},
    }
    management.cluster.apply([queue], server_side=False)
    # A job on the management cluster (no targetColony): its objects are created there.
    management.apply(_fleet(), _job("local-job", wandbApiKey="local-key"))
    # A request no colony can serve (no V100 anywhere): an AWS colony is provisioned for it.
    management.apply(
        {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "GPUProvisioningRequest",
            "metadata": {"name": "burst"},
            "spec": {"gpuShape": "V100", "numberOfGPUs": 1, "autoProvision": True},
        },
    )
    eventually(lambda: management.phase("colony", "fleet") == "Ready", 60)
    management.apply(
        _job("remote-job", targetColony="fleet", wandbApiKey="remote-key", ttlSecondsAfterFinished=0),
        _job("gpu-job", gpuTypes=["A100-80GB"]),
    )

    # The management-cluster job: its workers exist there (no node runs them); then the user deletes it.
    eventually(lambda: management.phase("ddpjob", "local-job") == "Scheduling", 30)
    selector = "training.exalsius.ai/job-name=local-job"
    assert management.cluster.get_json("pods", "-n", management.namespace, "-l", selector)["items"]
    management.delete("ddpjob", "local-job")

    # The provisioned colony goes with its request.
    provisioned = eventually(
        lambda: ((management.get("gpr", "burst") or {}).get("status") or {}).get("provisionedColony"), 30
    )
    management.delete("gpr", "burst")

    # The gpuTypes job runs on its GPR's reservation; when it ends, its GPR is deleted.
    _finish_workers(workers, "gpu-job")
    eventually(lambda: management.phase("ddpjob", "gpu-job") == "Succeeded", 30)
    eventually(lambda: management.gone("gpr", "gpu-job-gpus"), 30)

    _placement(management, workers)

    # The last job on the ephemeral colony ends: the job expires (TTL 0) and the colony is torn down.
    eventually(lambda: management.phase("ddpjob", "remote-job") == "Running", 30)
    _finish_workers(workers, "remote-job")
    eventually(lambda: management.gone("ddpjob", "remote-job"), 40)
    eventually(lambda: management.gone("ddpjob", "local-job"), 30)
    eventually(lambda: management.gone("gpr", "burst"), 30)
    eventually(lambda: management.gone("colony", provisioned), 40)
    eventually(lambda: management.gone("colony", "fleet"), 60)


def _placement(management: Objects, workers: Objects) -> None:
    """A user WorkloadDefinition (its status written), a PlacementPolicy selecting the namespace by a
    label, and a PyTorchJob it places on the colony; the test plays the framework in the colony (the
    copy succeeds): its status comes back, its GPUs are released, and deleting the original deletes
    the copy."""
    namespace = management.namespace
    management.cluster.kubectl("label", "namespace", namespace, "audit-placement=yes", "--overwrite")
    definition = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "WorkloadDefinition",
        "metadata": {"name": f"widgets-{namespace}"},
        "spec": {
            "target": {"group": "example.com", "version": "v1", "kind": "Widget", "plural": "widgets"},
            "components": [{"name": "worker", "podTemplatePath": ".spec.template"}],
        },
    }
    policy = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "PlacementPolicy",
        "metadata": {"name": f"audit-{namespace}"},
        "spec": {"namespaceSelector": {"matchLabels": {"audit-placement": "yes"}}, "priority": 150},
    }
    management.cluster.apply([definition, policy], server_side=False)
    pod = {
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "containers": [
                {"name": "pytorch", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        }
    }
    management.apply(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "placed"},
            "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": pod}}},
        }
    )
    eventually(lambda: workers.get("pytorchjob", "placed"), 60)
    workers.cluster.kubectl(
        "patch",
        "pytorchjob",
        "placed",
        "-n",
        workers.namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}),
    )
    eventually(
        lambda: ((management.get("pytorchjob", "placed") or {}).get("status") or {}).get("conditions"), 30
    )
    eventually(lambda: management.gone("gpr", "pytorchjob-placed"), 30)
    management.delete("pytorchjob", "placed")
    eventually(lambda: management.gone("pytorchjob", "placed"), 30)
    assert workers.gone("pytorchjob", "placed")
    management.cluster.kubectl(
        "delete",
        f"placementpolicy/{policy['metadata']['name']}",
        f"workloaddefinition/{definition['metadata']['name']}",
    )


# -- the audit log ---------------------------------------------------------------------------------


def audit_events(path: Path | None, user: str) -> list[dict[str, Any]]:
    """The audit log's events of `user`."""
    assert path is not None and path.exists(), "the API server writes no audit log"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["user"]["username"] == user]


def used(events: list[dict[str, Any]]) -> set[Permission]:
    """Every (apiGroup, resource[/subresource], verb) of allowed resource requests.

    A server-side apply that creates its object (201) is authorised as `patch` and then as `create`,
    but audited once, as `patch`: its 201 counts as a use of `create` too.
    """
    permissions: set[Permission] = set()
    for event in events:
        ref = event.get("objectRef")
        if not ref or not ref.get("resource") or event["responseStatus"].get("code") == 403:
            continue  # non-resource URLs (discovery) are everyone's
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        permissions.add((ref.get("apiGroup", ""), resource, event["verb"]))
        if event["verb"] == "patch" and event["responseStatus"].get("code") == 201:
            permissions.add((ref.get("apiGroup", ""), resource, "create"))
    return permissions


def _warnings(log: Path) -> str:
    """The operator's warning and error lines (the log is JSON, one object per line)."""
    lines = [line for line in log.read_text().splitlines() if '"level": "INFO"' not in line]
    return "\n".join(lines[-40:])


def denials(events: list[dict[str, Any]]) -> list[str]:
    """The requests the API server refused (403), one line each."""
    return sorted(
        {f"{e['verb']} {e['requestURI']}" for e in events if e["responseStatus"].get("code") == 403}
    )


def test_audit_events_become_permissions() -> None:
    """How requests are counted: subresources kept apart, a server-side apply that creates (201)
    also uses `create`, denied requests and non-resource URLs (discovery) use nothing."""

    def event(verb: str, code: int, **ref: str) -> dict[str, Any]:
        return {"verb": verb, "responseStatus": {"code": code}, "objectRef": ref or None}

    events = [
        event("patch", 201, apiGroup="cluster.x-k8s.io", resource="clusters"),
        event("patch", 200, apiGroup="infra.exalsius.ai", resource="colonies", subresource="status"),
        event("list", 200, resource="pods"),
        event("delete", 404, resource="secrets"),
        event("get", 403, resource="nodes"),
        event("get", 200),
    ]
    assert used(events) == {
        ("cluster.x-k8s.io", "clusters", "patch"),
        ("cluster.x-k8s.io", "clusters", "create"),
        ("infra.exalsius.ai", "colonies/status", "patch"),
        ("", "pods", "list"),
        ("", "secrets", "delete"),
    }
    role = {
        "kind": "Role",
        "rules": [{"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["list"]}],
    }
    assert granted([role]) == {("", "pods", "list"), ("", "services", "list")}


NAMESPACED_ONLY = {("", "secrets"), ("", "pods")}
"""Resources granted only in the watched namespaces when watchNamespaces is set (never cluster-wide)."""


@pytest.mark.parametrize("mode", sorted(INSTALLS))
def test_secrets_are_never_listed_and_stay_in_the_watched_namespaces(tools: Tools, mode: str) -> None:
    """No rule lists or watches Secrets (the operator gets each by name); with watchNamespaces, no
    ClusterRole grants Secrets or Pods, and the Roles granting them are in exactly those namespaces."""
    install = INSTALLS[mode]
    docs = _chart(tools, install)
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")]
    secret_verbs = {
        verb
        for role in roles
        for rule in role["rules"]
        if "" in rule["apiGroups"] and "secrets" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert secret_verbs == {"create", "get", "patch"}
    cluster_wide = granted([d for d in docs if d["kind"] == "ClusterRole"])
    in_roles = {d["metadata"]["namespace"]: granted([d]) for d in docs if d["kind"] == "Role"}
    namespaced = {(group, resource) for group, resource, _ in cluster_wide} & NAMESPACED_ONLY
    if mode == "namespaced":
        assert not namespaced, f"granted cluster-wide: {sorted(namespaced)}"
        holding = {ns for ns, grants in in_roles.items() if {(g, r) for g, r, _ in grants} & NAMESPACED_ONLY}
        assert holding == {install.namespace}
    else:
        assert namespaced == NAMESPACED_ONLY


@pytest.mark.parametrize("mode", sorted(INSTALLS))
def test_operator_uses_exactly_the_rbac_the_chart_grants(
    tools: Tools, audited: LocalCluster, audit_colony: LocalCluster, tmp_path: Path, mode: str
) -> None:
    install = INSTALLS[mode]
    docs = _chart(tools, install)
    for name in (install.release_namespace, install.namespace):
        audited.kubectl("create", "namespace", name)
    audited.apply([d for d in docs if d["kind"] in RBAC_KINDS], server_side=False)
    offers = (Path(colony.__file__).parent / "data" / "gpu-offers.csv").read_text()
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": OFFERS_CONFIGMAP, "namespace": install.release_namespace},
        "data": {"gpu-offers.csv": offers},
    }
    audited.apply([configmap])
    token = audited.kubectl(
        "create", "token", install.release, "-n", install.release_namespace, "--duration=1h"
    ).stdout.strip()
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(_operator_kubeconfig(audited, token))
    log = tmp_path / "operator.log"
    management = Objects(audited, install.namespace)

    colony_kubeconfig = audit_colony.kubeconfig()
    with CapiHarness(str(audited.kubeconfig_path), lambda _ns, _name: colony_kubeconfig):
        operator = _start_operator(docs, kubeconfig, log)
        try:
            _lifecycle(management, Objects(audit_colony, install.namespace))
        except AssertionError as error:
            found = audited.kubectl("get", "colonies,ddpjobs,gprs", "-n", install.namespace, "-o", "yaml")
            denied = denials(audit_events(audited.audit_log_path, install.service_account))
            raise AssertionError(
                f"{error}\ndenied: {denied}\nobjects: {found.stdout}\noperator warnings:\n{_warnings(log)}"
            ) from error
        finally:
            operator.stop()

    events = audit_events(audited.audit_log_path, install.service_account)
    assert events, "the audit log has no request of the operator's ServiceAccount"
    assert not denials(events), "requests of the operator were denied:\n" + "\n".join(denials(events))
    assert "Forbidden" not in log.read_text(), operator.log_tail(40)

    grants = granted(docs)
    missing = used(events) - grants
    assert not missing, f"used but not granted: {sorted(missing)}"
    unused = grants - used(events) - set(UNUSED_ALLOWED)
    assert not unused, f"granted but never used: {sorted(unused)}"
