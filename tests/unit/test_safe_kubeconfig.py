"""The safe kubeconfig loader: only inline credentials over https, nothing written to disk."""

from __future__ import annotations

import base64
import copy
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colony.devenv.pki import ClusterPKI, create_pki
from colony.kube import config as kube_config
from colony.kube.config import api_client_from_kubeconfig, ssl_context_from_memory
from colony.kube.safe_kubeconfig import (
    UNSAFE_SETTING,
    KubeconfigError,
    RefusedKubeconfigField,
    parse_kubeconfig,
)

SECRET = "s3cr3t-value-that-must-never-be-quoted"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": {"token": SECRET} if user is None else user}],
    }


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ClusterPKI:
    return create_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty temp dir that tempfile uses for everything during the test."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    monkeypatch.setenv("TMPDIR", str(directory))
    yield directory


def test_inline_token_is_accepted() -> None:
    credentials = parse_kubeconfig(_kubeconfig(cluster={"tls-server-name": "kubernetes"}))
    assert credentials.server == "https://127.0.0.1:6443"
    assert credentials.token == SECRET
    assert credentials.tls_server_name == "kubernetes"
    assert SECRET not in repr(credentials)


def test_inline_certificates_and_basic_auth_are_accepted(pki: ClusterPKI) -> None:
    cert, key, ca = pki.admin_cert.read_bytes(), pki.admin_key.read_bytes(), pki.serving_ca.read_bytes()
    credentials = parse_kubeconfig(
        _kubeconfig(
            cluster={"certificate-authority-data": _b64(ca)},
            user={"client-certificate-data": _b64(cert), "client-key-data": _b64(key)},
        )
    )
    assert (credentials.ca_data, credentials.client_cert, credentials.client_key) == (ca, cert, key)
    basic = parse_kubeconfig(_kubeconfig(user={"username": "admin", "password": SECRET}))
    assert (basic.username, basic.password) == ("admin", SECRET)


NEVER_ALLOWED = [
    ("user", "exec", {"apiVersion": "client.authentication.k8s.io/v1", "command": "touch", "args": [SECRET]}),
    ("user", "auth-provider", {"name": "oidc", "config": {"id-token": SECRET}}),
    ("user", "tokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
    ("user", "client-certificate", "/etc/" + SECRET + ".crt"),
    ("user", "client-key", "/etc/" + SECRET + ".key"),
    ("cluster", "certificate-authority", "/etc/" + SECRET + ".crt"),
    ("user", "as", SECRET),
    ("cluster", "something-new", SECRET),
]


@pytest.mark.parametrize("allow_unsafe", [False, True])
@pytest.mark.parametrize(("section", "field", "value"), NEVER_ALLOWED)
def test_plugins_file_paths_and_unknown_fields_are_refused_even_with_the_opt_in(
    section: str, field: str, value: Any, allow_unsafe: bool
) -> None:
    document = _kubeconfig()
    entry = document["clusters"][0]["cluster"] if section == "cluster" else document["users"][0]["user"]
    entry[field] = value
    with pytest.raises(RefusedKubeconfigField) as refused:
        parse_kubeconfig(document, allow_unsafe=allow_unsafe)
    assert refused.value.field == f"{section}.{field}"
    assert f"{section}.{field}" in str(refused.value)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize(
    ("field", "value"), [("proxy-url", "http://proxy.example:3128"), ("insecure-skip-tls-verify", True)]
)
def test_proxy_and_skipped_verification_need_the_opt_in(field: str, value: Any) -> None:
    document = _kubeconfig(cluster={field: value})
    with pytest.raises(RefusedKubeconfigField) as refused:
        parse_kubeconfig(document)
    assert refused.value.field == f"cluster.{field}"
    assert UNSAFE_SETTING in str(refused.value)
    allowed = parse_kubeconfig(document, allow_unsafe=True)
    assert allowed.proxy_url == value if field == "proxy-url" else allowed.insecure_skip_tls_verify


def test_verification_explicitly_kept_on_is_fine() -> None:
    assert not parse_kubeconfig(
        _kubeconfig(cluster={"insecure-skip-tls-verify": False})
    ).insecure_skip_tls_verify


def test_a_socks_proxy_is_refused_even_with_the_opt_in() -> None:
    with pytest.raises(KubeconfigError, match=r"cluster.proxy-url"):
        parse_kubeconfig(_kubeconfig(cluster={"proxy-url": "socks5://p:1080"}), allow_unsafe=True)


@pytest.mark.parametrize("allow_unsafe", [False, True])
@pytest.mark.parametrize(
    "server", ["http://127.0.0.1:6443", "127.0.0.1:6443", "file:///etc/passwd", "https://"]
)
def test_only_https_servers(server: str, allow_unsafe: bool) -> None:
    document = _kubeconfig()
    document["clusters"][0]["cluster"]["server"] = server
    with pytest.raises(RefusedKubeconfigField) as refused:
        parse_kubeconfig(document, allow_unsafe=allow_unsafe)
    assert refused.value.field == "cluster.server"


def test_only_the_current_context_is_checked_and_used() -> None:
    document = _kubeconfig()
    document["users"].append({"name": "other", "user": {"exec": {"command": "touch"}}})
    assert parse_kubeconfig(document).token == SECRET
    document["contexts"][0]["context"]["user"] = "other"
    with pytest.raises(RefusedKubeconfigField, match=r"user\.exec"):
        parse_kubeconfig(document)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("current-context"), "current-context"),
        (lambda d: d.update({"current-context": "nope"}), "contexts"),
        (lambda d: d["contexts"][0]["context"].update({"cluster": "nope"}), "clusters"),
        (lambda d: d["clusters"][0]["cluster"].pop("server"), "cluster.server"),
        (lambda d: d["users"][0]["user"].update({"client-certificate-data": "bm90"}), "user.client-key-data"),
        (lambda d: d["users"][0]["user"].update({"username": "admin"}), "user.password"),
        (
            lambda d: d["clusters"][0]["cluster"].update({"certificate-authority-data": "%%%"}),
            "cluster.certificate-authority-data",
        ),
        (lambda d: d["users"][0]["user"].update({"token": 42}), "user.token"),
    ],
)
def test_broken_kubeconfigs_name_the_field(mutate: Any, field: str) -> None:
    document = copy.deepcopy(_kubeconfig())
    mutate(document)
    with pytest.raises(KubeconfigError) as error:
        parse_kubeconfig(document)
    assert error.value.field == field
    assert not isinstance(error.value, RefusedKubeconfigField)


@pytest.mark.parametrize("document", [None, "a string", ["a", "list"], 42])
def test_not_a_mapping(document: Any) -> None:
    with pytest.raises(KubeconfigError):
        parse_kubeconfig(document)


def _inline(pki: ClusterPKI) -> dict[str, Any]:
    return _kubeconfig(
        cluster={"certificate-authority-data": _b64(pki.serving_ca.read_bytes())},
        user={
            "client-certificate-data": _b64(pki.admin_cert.read_bytes()),
            "client-key-data": _b64(pki.admin_key.read_bytes()),
        },
    )


async def test_a_client_is_built_from_memory_leaving_no_file(pki: ClusterPKI, private_tmp: Path) -> None:
    api = await api_client_from_kubeconfig(_inline(pki))
    try:
        assert api.configuration.host == "https://127.0.0.1:6443"
        assert (api.configuration.ssl_ca_cert, api.configuration.cert_file, api.configuration.key_file) == (
            None,
            None,
            None,
        )
        connector_ssl = api.rest_client.pool_manager.connector._ssl
        assert isinstance(connector_ssl, ssl.SSLContext)
        assert connector_ssl.verify_mode == ssl.CERT_REQUIRED and connector_ssl.check_hostname
        assert any(c["subject"] for c in connector_ssl.get_ca_certs())
    finally:
        await api.close()
    assert list(private_tmp.iterdir()) == []
    assert not hasattr(kube_config, "_TEMP_DIR")  # the old loader's temp dir is gone


async def test_without_memfd_the_private_file_is_removed(
    pki: ClusterPKI, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_memfd(*_: Any) -> int:
        raise OSError("memfd_create is not supported here")

    monkeypatch.setattr(os, "memfd_create", no_memfd)
    api = await api_client_from_kubeconfig(_inline(pki))
    await api.close()
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("memfd", [True, False])
def test_a_mismatched_key_is_an_error_naming_the_field(
    pki: ClusterPKI, private_tmp: Path, monkeypatch: pytest.MonkeyPatch, memfd: bool, tmp_path: Path
) -> None:
    if not memfd:
        monkeypatch.delattr(os, "memfd_create")
    other = create_pki(tmp_path / "other")
    document = _inline(pki)
    document["users"][0]["user"]["client-key-data"] = _b64(other.admin_key.read_bytes())
    with pytest.raises(KubeconfigError) as error:
        ssl_context_from_memory(parse_kubeconfig(document))
    assert error.value.field == "user.client-certificate-data"
    assert "PRIVATE KEY" not in str(error.value)
    assert list(private_tmp.iterdir()) == []


def test_a_ca_that_is_not_pem_names_the_field() -> None:
    document = _kubeconfig(cluster={"certificate-authority-data": _b64(SECRET.encode())})
    with pytest.raises(KubeconfigError) as error:
        ssl_context_from_memory(parse_kubeconfig(document))
    assert error.value.field == "cluster.certificate-authority-data"
    assert SECRET not in str(error.value)


async def test_opted_in_skip_verification_and_proxy_reach_the_client(private_tmp: Path) -> None:
    document = _kubeconfig(cluster={"insecure-skip-tls-verify": True, "proxy-url": "http://proxy:3128"})
    api = await api_client_from_kubeconfig(document, allow_unsafe=True)
    try:
        assert api.rest_client.proxy == "http://proxy:3128"
        context = api.rest_client.pool_manager.connector._ssl
        assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
        assert await api.configuration.get_api_key_with_prefix("BearerToken") == f"Bearer {SECRET}"
    finally:
        await api.close()


def test_a_broken_pem_ca_names_the_field() -> None:
    broken = b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
    document = _kubeconfig(cluster={"certificate-authority-data": _b64(broken)})
    with pytest.raises(KubeconfigError) as error:
        ssl_context_from_memory(parse_kubeconfig(document))
    assert error.value.field == "cluster.certificate-authority-data"
