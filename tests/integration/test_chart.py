"""The Helm chart: lint, templates, a server-side dry run against the real API server, the values
schema, the security settings of the Deployment, RBAC without wildcards, and the add-on catalog
generated from the operator's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import LocalCluster
from colony.devenv.tools import Tools
from colony.render.addons import CATALOG

CHART = Path(__file__).resolve().parents[2] / "charts" / "colony-operator"
ALL_OPTIONS = CHART / "ci" / "all-options-values.yaml"
ADDON_CATALOG = CHART / "files" / "addon-catalog.yaml"
ADDON_CATALOG_HEADER = (
    "# Generated from colony.render.addons.CATALOG and src/colony/versions.env by\n"
    "# tests/integration/test_chart.py; do not edit by hand: UPDATE_GOLDEN=1 regenerates it.\n"
)
# Namespaces named by ci/all-options-values.yaml's watchNamespaces.
ALL_OPTIONS_NAMESPACES = ("team-a", "team-b")
VALUE_SETS = {"defaults": (), "all-options": ("-f", str(ALL_OPTIONS))}


def helm(tools: Tools, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the pinned helm; with `check`, fail the test with helm's output when it fails."""
    result = subprocess.run(
        [str(tools.binary("helm")), *args], capture_output=True, text=True, check=False, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr + result.stdout
    return result


def render(tools: Tools, namespace: str, *args: str, release: str = "colony") -> list[dict[str, Any]]:
    """`helm template` of the chart, parsed (empty documents dropped)."""
    text = helm(tools, "template", release, str(CHART), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def addon_catalog_text() -> str:
    """files/addon-catalog.yaml as generated from the operator's catalog (JSON is YAML: every
    version stays a string)."""
    catalog = {name: chart.spec() for name, chart in sorted(CATALOG.items())}
    return ADDON_CATALOG_HEADER + json.dumps(catalog, indent=2, sort_keys=True) + "\n"


def _of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The chart's objects of `kind`, without the tenants' aggregated roles (userRoles)."""
    return [doc for doc in docs if doc["kind"] == kind and not _tenant_role(doc)]


def _tenant_role(doc: dict[str, Any]) -> bool:
    return bool(doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "tenant-role")


# -- pure checks (no control plane) ----------------------------------------------------------------


def test_addon_catalog_file_is_generated_from_the_operators_catalog() -> None:
    if os.environ.get("UPDATE_GOLDEN"):
        ADDON_CATALOG.write_text(addon_catalog_text())
    assert ADDON_CATALOG.read_text() == addon_catalog_text(), (
        f"{ADDON_CATALOG} is out of date with colony.render.addons / versions.env: "
        "regenerate with UPDATE_GOLDEN=1 pytest tests/integration/test_chart.py"
    )


def test_values_and_schema_offer_exactly_the_catalog_addons() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    names = set(CATALOG)
    assert set(values["addons"]) - {"namespace", "clusterSelector"} == names
    assert set(schema["properties"]["addons"]["properties"]) - {"namespace", "clusterSelector"} == names
    assert all(not values["addons"][name]["enabled"] for name in names)
    assert values["grafanaDashboard"]["enabled"] is False


def test_schema_is_strict_everywhere() -> None:
    """Every object of the schema either lists its properties with additionalProperties false or is
    a free-form map on purpose (labels, annotations, resources, affinity...)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    free_form = {"affinity", "tolerations", "extraEnv"}

    def walk(node: dict[str, Any], path: str) -> None:
        if path.split(".")[-1].removesuffix("[]") in free_form:
            return  # Kubernetes' own types, validated by the API server
        if "properties" in node:
            assert node.get("additionalProperties") is False, f"{path or 'values'} accepts unknown keys"
            for key, child in node["properties"].items():
                walk(child, f"{path}.{key}".lstrip("."))
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        if node.get("type") == "object" and "properties" not in node:
            assert "additionalProperties" in node, path

    walk(schema, "")


# -- helm lint and template ------------------------------------------------------------------------


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_chart_lints_strictly(tools: Tools, values: str) -> None:
    helm(tools, "lint", "--strict", str(CHART), *VALUE_SETS[values])


@pytest.mark.parametrize(
    "setting",
    [
        "unknown=1",
        "image.unknown=1",
        "addons.not-in-catalog.enabled=true",
        "metrics.port=0",
        "watchNamespaces={Bad_Name}",
        "serviceMonitor.interval=often",
        "placement.kinds={PyTorchJob}",
        "livenessProbe.periodSeconds=0",
        "readinessProbe.unknown=1",
        "networkPolicy.apiServerPorts={0}",
        "networkPolicy.apiServerCIDRs={not-a-cidr}",
        "crds.install=maybe",
        "replicaCount=0",
        "leaderElection.leaseDurationSeconds=1",
        "podDisruptionBudget.maxUnavailable=1",
        "userRoles.queueViewer.subjects[0].kind=Role,userRoles.queueViewer.subjects[0].name=x",
        "userRoles.queueViewer.subjects[0].kind=ServiceAccount,userRoles.queueViewer.subjects[0].name=x",
    ],
)
def test_schema_rejects_bad_values(tools: Tools, setting: str) -> None:
    result = helm(tools, "template", "colony", str(CHART), "--set", setting, check=False)
    assert result.returncode != 0 and "schema" in result.stderr, result.stderr


def test_deployment_is_hardened_and_probed(tools: Tools) -> None:
    (deployment,) = _of_kind(render(tools, "colony-system", "--set", "metrics.port=9191"), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsUser"] == 65532 and security["runAsNonRoot"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in container["args"]
    assert "--metrics-port=9191" in container["args"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {"name": "health", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_one_replica_elects_itself_and_has_no_disruption_budget(tools: Tools) -> None:
    docs = render(tools, "colony-system")
    (deployment,) = _of_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"  # the Lease keeps one leader
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-election-namespace=colony-system" in args
    assert "--leader-election-lease=colony-colony-operator-leader" in args
    assert {"--lease-duration=8", "--lease-renew-deadline=5", "--lease-retry-period=1"} <= set(args)
    assert not _of_kind(docs, "PodDisruptionBudget")
    (role,) = [r for r in _of_kind(docs, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["colony-colony-operator-leader"],
            "verbs": ["get", "patch"],
        },
    ]
    (binding,) = [
        b for b in _of_kind(docs, "RoleBinding") if b["metadata"]["name"].endswith("-leader-election")
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_several_replicas_get_a_disruption_budget_and_need_leader_election(tools: Tools) -> None:
    docs = render(
        tools, "colony-system", "--set", "replicaCount=3", "--set", "leaderElection.leaseDurationSeconds=10"
    )
    (deployment,) = _of_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert "--lease-duration=10" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    (budget,) = _of_kind(docs, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    # a budget never blocks every drain: at most replicas - 1 must stay
    two = render(
        tools, "colony-system", "--set", "replicaCount=2", "--set", "podDisruptionBudget.minAvailable=5"
    )
    (budget,) = _of_kind(two, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    for bad, message in (
        (
            ("--set", "replicaCount=2", "--set", "leaderElection.enabled=false"),
            "needs leaderElection.enabled",
        ),
        (("--set", "leaderElection.renewDeadlineSeconds=8"), "renewDeadlineSeconds < leaseDurationSeconds"),
    ):
        result = helm(tools, "template", "colony", str(CHART), *bad, check=False)
        assert result.returncode != 0 and message in result.stderr, result.stderr
    single = render(tools, "colony-system", "--set", "leaderElection.enabled=false")
    (deployment,) = _of_kind(single, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--leader-election") for a in args)
    assert not [r for r in _of_kind(single, "Role") if "leader" in r["metadata"]["name"]]


def test_metrics_service_and_service_monitor(tools: Tools) -> None:
    docs = render(tools, "colony-system", "-f", str(ALL_OPTIONS))
    services = _of_kind(docs, "Service")
    (service,) = [s for s in services if s["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"]
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9191, "targetPort": "metrics", "protocol": "TCP"}
    ]
    (monitor,) = _of_kind(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    defaults = render(tools, "colony-system")
    assert not _of_kind(defaults, "ServiceMonitor") and not _of_kind(defaults, "HelmChartProxy")
    without_metrics = render(tools, "colony-system", "--set", "metrics.enabled=false")
    assert not [s for s in _of_kind(without_metrics, "Service") if s["metadata"]["name"].endswith("-metrics")]


def test_addon_proxies_match_what_the_operator_renders(tools: Tools) -> None:
    proxies = {
        p["metadata"]["labels"]["colony.exalsius.ai/addon"]: p
        for p in _of_kind(render(tools, "colony-system", "-f", str(ALL_OPTIONS)), "HelmChartProxy")
    }
    assert set(proxies) == set(CATALOG)
    for name, proxy in proxies.items():
        spec = dict(proxy["spec"])
        selector = spec.pop("clusterSelector")
        expected = CATALOG[name].spec()
        if name == "kuberay":
            expected["valuesTemplate"] = "image:\n  pullPolicy: IfNotPresent\n"
        assert spec == expected, name
        assert proxy["metadata"]["namespace"] == "colony-system"
        assert selector == {
            "nvidia-operator": {"matchLabels": {"gpu": "nvidia"}},
            "kube-prometheus-stack": {
                "matchExpressions": [{"key": "monitoring", "operator": "NotIn", "values": ["off"]}]
            },
        }.get(name, {"matchLabels": {"app.kubernetes.io/managed-by": "colony-operator"}})


def _rules(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [rule for doc in _of_kind(docs, kind) for rule in doc["rules"]]


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_rbac_has_no_wildcards(tools: Tools, values: str) -> None:
    docs = render(tools, "colony-system", *VALUE_SETS[values])
    rules = _rules(docs, "ClusterRole") + _rules(docs, "Role")
    assert rules
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in entry for entry in rule.get(field, [])), rule
        assert "nonResourceURLs" not in rule


def test_placement_kinds_are_granted_and_handed_to_the_operator(tools: Tools) -> None:
    """placement.kinds (plural.group): listed cluster-wide, patched with their status in the watched
    namespaces, and exactly those in COLONY_PLACEMENT_KINDS."""
    docs = render(tools, "colony-system", "-f", str(ALL_OPTIONS))
    cluster = [r for r in _rules(docs, "ClusterRole") if r["apiGroups"] == ["example.com"]]
    assert cluster == [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}]
    roles = [r for r in _rules(docs, "Role") if r["apiGroups"] == ["example.com"]]
    assert roles and all(
        r["resources"] == ["widgets", "widgets/status"] and r["verbs"] == ["patch"] for r in roles
    )
    (deployment,) = _of_kind(docs, "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["COLONY_PLACEMENT_KINDS"] == "pytorchjobs.kubeflow.org,widgets.example.com"
    defaults = render(tools, "colony-system")
    (deployment,) = _of_kind(defaults, "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "rayjobs.ray.io" in env["COLONY_PLACEMENT_KINDS"].split(",")


def test_rbac_is_namespaced_for_exact_watch_namespaces(tools: Tools) -> None:
    cluster_wide = render(tools, "colony-system")
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in _of_kind(cluster_wide, "Role")}
    assert roles == {("colony-system", "colony-colony-operator-leader-election")}  # only the Lease
    assert len(_of_kind(cluster_wide, "ClusterRole")) == 1
    namespaced = render(tools, "colony-system", "-f", str(ALL_OPTIONS))
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in _of_kind(namespaced, "Role")}
    assert roles == {
        ("team-a", "colony-operator"),
        ("team-b", "colony-operator"),
        ("colony-system", "colony-operator-offers-catalog"),
        ("colony-system", "colony-operator-leader-election"),
    }
    cluster_resources = {res for rule in _rules(namespaced, "ClusterRole") for res in rule["resources"]}
    assert "secrets" not in cluster_resources and "pods" not in cluster_resources
    namespace_writes = [
        r
        for r in _rules(namespaced, "ClusterRole")
        if "namespaces" in r["resources"] and set(r["verbs"]) - {"list", "watch"}
    ]
    assert not namespace_writes, "the operator never writes namespaces of the management cluster"
    # kopf patterns cannot be granted per namespace: cluster-wide RBAC.
    pattern = render(tools, "colony-system", "--set", "watchNamespaces={team-*}")
    assert len(_of_kind(pattern, "Role")) == 1 and len(_of_kind(pattern, "ClusterRole")) == 1
    (deployment,) = _of_kind(pattern, "Deployment")
    assert "--namespace=team-*" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_existing_service_account_and_no_rbac(tools: Tools) -> None:
    docs = render(
        tools,
        "colony-system",
        "--set",
        "serviceAccount.create=false",
        "--set",
        "serviceAccount.name=platform-operator",
        "--set",
        "rbac.create=false",
    )
    kinds = {doc["kind"] for doc in docs}
    assert not kinds & {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    (deployment,) = _of_kind(docs, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "platform-operator"
    result = helm(
        tools, "template", "colony", str(CHART), "--set", "serviceAccount.create=false", check=False
    )
    assert result.returncode != 0 and "serviceAccount.name is required" in result.stderr


# -- against the real API server -------------------------------------------------------------------


def _ensure_namespaces(management: LocalCluster, names: tuple[str, ...]) -> None:
    for name in names:
        if management.kubectl("get", "namespace", name, check=False).returncode != 0:
            management.kubectl("create", "namespace", name)


def _install_service_monitor_crd(tools: Tools, management: LocalCluster) -> None:
    """prometheus-operator's ServiceMonitor CRD (pinned in versions.env, fetched by hack/fetch-crds.sh)."""
    files = sorted((tools.upstream_crds / "prometheus-operator").glob("*servicemonitors.yaml"))
    assert files, "hack/fetch-crds.sh did not fetch the ServiceMonitor CRD"
    management.install_crds(files)


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_chart_templates_apply_in_dry_run(
    tools: Tools, management: LocalCluster, namespace: str, values: str
) -> None:
    _ensure_namespaces(management, ALL_OPTIONS_NAMESPACES)
    _install_service_monitor_crd(tools, management)
    text = helm(
        tools,
        "template",
        "colony",
        str(CHART),
        "--namespace",
        namespace,
        "--include-crds",
        *VALUE_SETS[values],
    ).stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(text) if doc}
    assert {"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole", "Service"} <= kinds
    if values == "all-options":
        assert {"ServiceMonitor", "HelmChartProxy", "Role", "RoleBinding", "NetworkPolicy"} <= kinds
    applied = management.kubectl(
        "apply", "--dry-run=server", "-f", "-", input_text=text
    )  # namespaces are in the manifests
    assert "(server dry run)" in applied.stdout


def test_helm_install_dry_run_prints_notes(tools: Tools, management: LocalCluster, namespace: str) -> None:
    result = helm(
        tools,
        "install",
        "colony",
        str(CHART),
        "--namespace",
        namespace,
        "--dry-run=server",
        # the shared management cluster's CRDs were applied by the fixture, not by Helm: adopt them
        # (the documented path for CRDs installed before they were templates of the chart)
        "--take-ownership",
        "--kubeconfig",
        str(management.kubeconfig_path),
        "--set",
        "offersCatalogConfigMap=gpu-offers",
        "--set",
        "addons.volcano-sh.enabled=true",
    )
    notes = result.stdout.split("NOTES:", 1)[1]
    assert f"installed as colony-colony-operator in namespace {namespace}" in notes
    assert "watches every namespace" in notes
    assert f"ConfigMap {namespace}/gpu-offers" in notes
    assert "volcano-sh" in notes
    # the first colony NOTES suggests works on any cluster, and the file it names exists
    assert "kubectl apply -f examples/colony-existing.yaml" in notes
    assert (CHART.parents[1] / "examples" / "colony-existing.yaml").is_file()


# -- security contexts, probes, spreading, NetworkPolicy, tenant roles --------------------------------


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = _of_kind(docs, "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def test_security_contexts_are_overridable_for_openshift(tools: Tools) -> None:
    """restricted-v2 assigns the UID: dropping runAsUser/runAsGroup/fsGroup keeps the rest hardened."""
    unset = [
        f"{ctx}.{key}=null"
        for ctx in ("podSecurityContext", "containerSecurityContext")
        for key in ("runAsUser", "runAsGroup")
    ]
    args = [arg for setting in [*unset, "podSecurityContext.fsGroup=null"] for arg in ("--set", setting)]
    pod = _pod(render(tools, "colony-system", *args))
    container = pod["containers"][0]["securityContext"]
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(pod["securityContext"])
    assert not {"runAsUser", "runAsGroup"} & set(container)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["readOnlyRootFilesystem"] is True and container["capabilities"] == {"drop": ["ALL"]}
    assert container["allowPrivilegeEscalation"] is False


def test_probes_and_topology_spread_are_configurable(tools: Tools) -> None:
    pod = _pod(render(tools, "colony-system", "-f", str(ALL_OPTIONS)))
    container = pod["containers"][0]
    assert container["livenessProbe"]["periodSeconds"] == 30
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["failureThreshold"] == 6
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    defaults = _pod(render(tools, "colony-system"))
    assert defaults["containers"][0]["livenessProbe"]["initialDelaySeconds"] == 10
    assert "topologySpreadConstraints" not in defaults


def test_network_policy_allows_only_dns_api_servers_probes_webhook_and_metrics(tools: Tools) -> None:
    assert not _of_kind(render(tools, "colony-system"), "NetworkPolicy")
    docs = render(tools, "colony-system", "-f", str(ALL_OPTIONS))
    (policy,) = _of_kind(docs, "NetworkPolicy")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    health = {"ports": [{"port": "health", "protocol": "TCP"}]}
    # the API server calls the webhook (failurePolicy Fail by default) from an address not known here
    webhook = {"ports": [{"port": "webhook", "protocol": "TCP"}]}
    assert spec["ingress"] == [
        health,
        webhook,
        {
            "ports": [{"port": "metrics", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        },
    ]
    # every named port the policy admits is a port of the container
    (container,) = _pod(docs)["containers"]
    named = {p["name"] for p in container["ports"]}
    assert {p["port"] for rule in spec["ingress"] for p in rule["ports"]} <= named
    without = render(tools, "colony-system", "-f", str(ALL_OPTIONS), "--set", "webhook.enabled=false")
    (no_webhook,) = _of_kind(without, "NetworkPolicy")
    assert no_webhook["spec"]["ingress"] == [health, spec["ingress"][2]]
    dns, api = spec["egress"][:2]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert {"port": 6443, "protocol": "TCP"} in api["ports"]
    assert {"port": 30000, "endPort": 32767, "protocol": "TCP"} in api["ports"]
    assert api["to"] == [{"ipBlock": {"cidr": "10.0.0.0/8"}}]


TENANT_KINDS = {"colonies", "gpuprovisioningrequests", "ddpjobs"}
ADMIN_KINDS = {"gpuqueues", "placementpolicies", "workloaddefinitions", "colonyshares"}


def test_tenant_roles_aggregate_and_never_grant_admin_kinds(tools: Tools) -> None:
    roles = {d["metadata"]["name"]: d for d in render(tools, "colony-system") if _tenant_role(d)}
    editor, viewer = roles["colony-colony-operator-editor"], roles["colony-colony-operator-viewer"]
    assert editor["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert editor["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    for role in (editor, viewer):
        resources = {r.split("/")[0] for rule in role["rules"] for r in rule["resources"]}
        assert resources == TENANT_KINDS and not resources & ADMIN_KINDS
        assert not any("*" in entry for rule in role["rules"] for field in rule.values() for entry in field)
        status_writes = [
            r
            for r in role["rules"]
            if any("/" in x for x in r["resources"])
            and r["verbs"] != ["get"]
            and set(r["verbs"]) - {"get", "list", "watch"}
        ]
        assert not status_writes, "tenants never write status"
    assert {v for rule in viewer["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}
    none = render(tools, "colony-system", "--set", "userRoles.create=false")
    assert not [d for d in none if _tenant_role(d)]


QUEUE_VIEWER_KINDS = {"gpuqueues", "placementpolicies", "workloaddefinitions"}


def test_queue_viewer_role_reads_cluster_scoped_queues_and_is_bindable(tools: Tools) -> None:
    """Cluster-scoped kinds cannot be aggregated into namespaced roles: <fullname>-queue-viewer is a
    read-only ClusterRole on them (never colonyshares), bound only to the subjects the values name."""
    crds = {
        doc["spec"]["names"]["plural"]: doc["spec"]["scope"]
        for path in (CHART / "files" / "crds").glob("*.yaml")
        for doc in [yaml.safe_load(path.read_text())]
    }
    docs = render(tools, "colony-system")
    (role,) = [d for d in docs if d["metadata"]["name"] == "colony-colony-operator-queue-viewer"]
    assert role["kind"] == "ClusterRole" and _tenant_role(role)
    assert not any(k.startswith("rbac.authorization.k8s.io/aggregate") for k in role["metadata"]["labels"])
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert {r.split("/")[0] for r in resources} == QUEUE_VIEWER_KINDS
    assert all(crds[kind] == "Cluster" for kind in QUEUE_VIEWER_KINDS)
    assert {f"{kind}/status" for kind in QUEUE_VIEWER_KINDS} <= resources
    assert {v for rule in role["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}
    assert all(rule["apiGroups"] == ["infra.exalsius.ai"] for rule in role["rules"])
    assert not [d for d in docs if d["kind"] == "ClusterRoleBinding" and _tenant_role(d)], (
        "no binding by default"
    )

    bound = render(tools, "colony-system", "-f", str(ALL_OPTIONS))
    (binding,) = [d for d in bound if d["kind"] == "ClusterRoleBinding" and _tenant_role(d)]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "colony-operator-queue-viewer",
    }
    assert {(s["kind"], s["name"]) for s in binding["subjects"]} == {
        ("Group", "ml-users"),
        ("ServiceAccount", "dashboards"),
    }
    off = render(tools, "colony-system", "--set", "userRoles.queueViewer.create=false")
    assert not [d for d in off if d["metadata"]["name"].endswith("-queue-viewer")]
    assert [d for d in off if _tenant_role(d)], "the editor/viewer roles stay"
