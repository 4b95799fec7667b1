"""Pure parts of the dev environment: certificates, kwok nodes and stages, pinned versions."""

from __future__ import annotations

from pathlib import Path

import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from colony.devenv.kwok import (
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    MANAGED_ANNOTATION,
    OUTCOME_ANNOTATION,
    GPUNodeSpec,
    gpu_node_manifests,
    kwok_config,
)
from colony.devenv.pki import create_pki
from colony.devenv.tools import binary_dir
from colony.versions import pinned, read_pinned_versions


def test_admin_certificate_is_system_masters_signed_by_client_ca(tmp_path: Path) -> None:
    pki = create_pki(tmp_path)
    admin = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes())
    client_ca = x509.load_pem_x509_certificate(pki.client_ca.read_bytes())
    admin.verify_directly_issued_by(client_ca)
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    server = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    server.verify_directly_issued_by(x509.load_pem_x509_certificate(pki.serving_ca.read_bytes()))
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert oct(pki.admin_key.stat().st_mode & 0o777) == "0o600"


def test_gpu_nodes_are_kwok_managed_with_capacity() -> None:
    nodes = gpu_node_manifests(GPUNodeSpec("h100", product="NVIDIA-H100", gpus=4, count=3))
    assert [n["metadata"]["name"] for n in nodes] == ["h100-0", "h100-1", "h100-2"]
    for node in nodes:
        assert node["metadata"]["annotations"][MANAGED_ANNOTATION] == "fake"
        assert node["metadata"]["labels"][GPU_PRODUCT_LABEL] == "NVIDIA-H100"
        assert node["status"]["allocatable"][GPU_RESOURCE] == "4"


def test_cpu_only_node_has_no_gpu_labels() -> None:
    (node,) = gpu_node_manifests(GPUNodeSpec("cpu", gpus=0))
    assert GPU_RESOURCE not in node["status"]["capacity"]
    assert GPU_PRODUCT_LABEL not in node["metadata"]["labels"]


def test_kwok_config_has_stock_and_outcome_stages(tmp_path: Path) -> None:
    for name in ("node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete"):
        (tmp_path / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}}
            )
        )
    documents = list(yaml.safe_load_all(kwok_config(tmp_path)))
    assert {d["kind"] for d in documents} == {"Stage"}
    names = [d["metadata"]["name"] for d in documents]
    assert names[-2:] == ["colony-pod-succeeded", "colony-pod-failed"]
    failed = documents[-1]["spec"]
    assert any(OUTCOME_ANNOTATION in e["key"] for e in failed["selector"]["matchExpressions"])
    assert "exitCode" in failed["next"]["statusTemplate"]


def test_binary_dir_names_the_pinned_versions() -> None:
    versions = read_pinned_versions()
    assert versions["KUBERNETES_VERSION"].startswith("v1.3")
    assert versions["KUBERNETES_VERSION"] in binary_dir().name
    assert versions["ETCD_VERSION"].startswith("v3.6.")


def test_pinned_names_a_missing_key() -> None:
    assert pinned("ETCD_VERSION") == read_pinned_versions()["ETCD_VERSION"]
    try:
        pinned("NO_SUCH_VERSION")
    except KeyError as error:
        assert "NO_SUCH_VERSION" in str(error)
    else:
        raise AssertionError("expected KeyError")
