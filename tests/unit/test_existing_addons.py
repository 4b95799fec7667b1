"""Helm releases planned for `existing` clusters, and the kubeconfig checks before helm sees one."""

from __future__ import annotations

import base64
import os
import stat
from typing import Any

import pytest
from pydantic import ValidationError

from colony.api.colony import ColonySpec
from colony.kube.helm import UnsafeKubeconfig, check_kubeconfig, private_kubeconfig
from colony.labels import COLONY_LABEL
from colony.render import render_colony
from colony.render.addons import CATALOG
from colony.render.existing_addons import HelmReleasePlan, plan_existing_releases
from tests.unit.test_render_golden import colony_ref, docker


def existing_spec(workload: list[str], additional: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "k8sVersion": "v1.36.3",
        "colonyClusters": [
            {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": "onprem-kubeconfig"}}}
        ],
        "workloadDependencies": [{"name": n} for n in workload],
        "additionalDependencies": additional or [],
    }


def extra(name: str, **spec: Any) -> dict[str, Any]:
    return {"name": name, "spec": {"repoURL": "https://127.0.0.1:8879", "chartName": name, **spec}}


def plan(spec: dict[str, Any]) -> tuple[list[HelmReleasePlan], dict[str, str]]:
    ref = colony_ref("dev")
    parsed = ColonySpec.model_validate(spec)
    return plan_existing_releases(ref, parsed, render_colony(ref, parsed, {}))


def test_catalog_dependencies_get_the_same_chart_version_and_values_as_the_proxies() -> None:
    plans, refused = plan(existing_spec(["volcano-sh", "nvidia-operator", "kubeflow-training"]))
    assert refused == {}
    by_name = {p.dependency: p for p in plans}
    volcano = by_name["volcano-sh"]
    assert (volcano.chart_ref, volcano.repo) == ("volcano", CATALOG["volcano-sh"].repo_url)
    assert volcano.version == CATALOG["volcano-sh"].version
    assert (volcano.release_name, volcano.namespace) == ("volcano", "volcano-system")
    assert volcano.wait and volcano.timeout == "10m" and volcano.create_namespace
    assert volcano.cluster == "onprem" and volcano.kubeconfig_secret == "onprem-kubeconfig"
    gpu = by_name["nvidia-operator"]
    assert gpu.values["toolkit"]["env"][0]["name"] == "CONTAINERD_CONFIG"
    trainer = by_name["kubeflow-training"]  # an OCI chart: the whole reference, no --repo
    assert trainer.chart_ref == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer" and trainer.repo is None


def test_cluster_api_clusters_get_no_helm_release_from_the_operator() -> None:
    spec = docker(True)
    spec["workloadDependencies"] = [{"name": "volcano-sh"}]
    assert plan(spec) == ([], {})


def test_spec_hash_changes_with_version_and_values_only() -> None:
    base = plan(existing_spec([], [extra("demo", version="0.1.0")]))[0][0]
    same = plan(existing_spec([], [extra("demo", version="0.1.0")]))[0][0]
    newer = plan(existing_spec([], [extra("demo", version="0.2.0")]))[0][0]
    valued = plan(existing_spec([], [extra("demo", version="0.1.0", valuesTemplate="a: 1")]))[0][0]
    assert base.spec_hash == same.spec_hash
    assert len({base.spec_hash, newer.spec_hash, valued.spec_hash}) == 3
    twins = plan(
        existing_spec([], [extra("demo", version="0.1"), extra("twin", chartName="demo", version="0.1")])
    )
    assert twins[0][0].spec_hash != twins[0][1].spec_hash  # same chart and values, another release
    assert valued.values == {"a": 1}


def test_selector_of_another_label_value_is_not_installed() -> None:
    # Both dependencies select team=a vs team=b: only the first one's label is put on clusters.
    plans, _ = plan(
        existing_spec(
            [],
            [
                extra("one", clusterSelector={"matchLabels": {"team": "a"}}),
                extra("two", clusterSelector={"matchLabels": {"team": "b"}}),
            ],
        )
    )
    assert [p.dependency for p in plans] == ["one"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("releaseName", "--debug"),
        ("releaseName", "UPPER"),
        ("namespace", "-n"),
        ("repoURL", "file:///etc"),
        ("repoURL", "--kubeconfig=/etc/passwd"),
        ("repoURL", "http://host/ x"),
        ("repoURL", "http://169.254.169.254/latest"),
    ],
)
def test_hostile_names_are_refused_at_admission_before_any_plan(field: str, value: str) -> None:
    """Names are DNS-1123 at admission (the CRD's pattern is the model's), so helm never sees them."""
    with pytest.raises(ValidationError, match=field):
        ColonySpec.model_validate(existing_spec([], [extra("extra", **{field: value})]))


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("chartName", "../../etc", "chartName"),
        ("chartName", "--post-renderer=/bin/sh", "chartName"),
        ("chartName", "/var/run/secrets/chart", "chartName"),
        ("version", "--set=x", "version"),
        ("valuesTemplate", "{{ .Cluster.metadata.name }}", "Go templating"),
        ("valuesTemplate", "[1, 2]", "mapping"),
        ("options", {"timeout": "--wait"}, "options.timeout"),
        ("credentials", {"secret": {"name": "x"}}, "credentials"),
    ],
)
def test_hostile_fields_are_refused_with_a_reason(field: str, value: Any, reason: str) -> None:
    plans, refused = plan(existing_spec([], [extra("evil", **{field: value})]))
    assert plans == []
    ((proxy, message),) = refused.items()
    assert proxy == "dev-evil" and reason in message and "evil" in message


def test_colony_label_is_always_this_colony() -> None:
    plans, _ = plan(
        existing_spec([], [extra("mine", clusterSelector={"matchLabels": {COLONY_LABEL: "other"}})])
    )
    assert [p.dependency for p in plans] == ["mine"]


GOOD = {
    "apiVersion": "v1",
    "clusters": [
        {"name": "c", "cluster": {"server": "https://1.2.3.4", "certificate-authority-data": "eA=="}}
    ],
    "users": [{"name": "u", "user": {"client-certificate-data": "eA==", "client-key-data": "eA=="}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("users", "exec", {"command": "/bin/sh", "args": ["-c", "id"], "apiVersion": "v1"}),
        ("users", "auth-provider", {"name": "gcp", "config": {"cmd-path": "/bin/sh"}}),
        ("users", "tokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
        ("users", "client-key", "/etc/colony/key.pem"),
        ("users", "client-certificate", "/etc/colony/cert.pem"),
        ("clusters", "certificate-authority", "/etc/passwd"),
    ],
)
def test_kubeconfigs_that_run_code_or_read_files_are_refused(section: str, field: str, value: Any) -> None:
    check_kubeconfig(GOOD)
    hostile = {**GOOD, section: [{**GOOD[section][0]}]}  # type: ignore[dict-item]
    inner = section[:-1]
    hostile[section][0][inner] = {**GOOD[section][0][inner], field: value}  # type: ignore[index]
    with pytest.raises(UnsafeKubeconfig, match=field):
        check_kubeconfig(hostile)


@pytest.mark.parametrize("broken", ["just a string", {"users": ["not a mapping"]}, {"clusters": [{"x": 1}]}])
def test_malformed_kubeconfigs_are_refused(broken: Any) -> None:
    with pytest.raises(UnsafeKubeconfig):
        check_kubeconfig(broken)


def test_kubeconfig_file_is_private_and_removed_after_use() -> None:
    with private_kubeconfig(GOOD) as path:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert "certificate-authority-data" in path.read_text()
    assert not path.exists() and not os.path.exists(path.parent)
    with (
        pytest.raises(UnsafeKubeconfig),
        private_kubeconfig({**GOOD, "users": [{"name": "u", "user": {"exec": {}}}]}),
    ):
        pass


def test_the_existing_cluster_example_plans_its_addons() -> None:
    """examples/colony-existing.yaml (NOTES.txt's first colony) is valid and gets Volcano by Helm."""
    import yaml

    from tests.unit.test_cli_render import EXAMPLES

    document = yaml.safe_load((EXAMPLES / "colony-existing.yaml").read_text())
    plans, refused = plan(document["spec"])
    assert refused == {} and [(p.dependency, p.cluster) for p in plans] == [("volcano-sh", "main")]
    assert plans[0].kubeconfig_secret == "my-cluster-kubeconfig"


PLANTED = "SECRETTOKEN123"


@pytest.mark.parametrize(
    "document",
    [
        f"apiVersion: v1\nusers:\n- name: u\n  user:\n    token: {PLANTED}: x\n",  # "mapping values"
        f"users:\n  - token: '{PLANTED}\n",  # unterminated quote
        f"token: {PLANTED}\n\t- tab",  # a tab where YAML wants indentation
        f"[{PLANTED}",
    ],
)
def test_a_broken_kubeconfig_reports_its_line_never_its_text(document: str) -> None:
    """status.addons[].message gets the YAML error's position only: PyYAML's own text quotes the
    Secret's lines, and the token in them (issue 16, G2)."""
    from pathlib import Path

    from colony.controllers.existing_addons import kubeconfig_client

    encoded = base64.b64encode(document.encode()).decode()
    client, message = kubeconfig_client(Path("/bin/helm"), encoded, "kubeconfig in Secret ns/s")
    assert client is None
    assert PLANTED not in message
    assert message.startswith("kubeconfig in Secret ns/s is invalid: not base64-encoded YAML (line ")


def test_a_kubeconfig_that_is_not_base64_is_refused_without_its_text() -> None:
    from pathlib import Path

    from colony.controllers.existing_addons import kubeconfig_client

    client, message = kubeconfig_client(Path("/bin/helm"), f"{PLANTED}!!", "kubeconfig in Secret ns/s")
    assert client is None and PLANTED not in message and "not base64-encoded YAML" in message


def test_a_valid_kubeconfig_gets_a_helm_client() -> None:
    from pathlib import Path

    import yaml

    from colony.controllers.existing_addons import kubeconfig_client

    encoded = base64.b64encode(yaml.safe_dump(GOOD).encode()).decode()
    client, message = kubeconfig_client(Path("/bin/helm"), encoded, "kubeconfig in Secret ns/s")
    assert client is not None and message == ""
