"""No name, however crafted, can make a request path leave its namespace or its resource.

The paths are checked as the HTTP client sends them: aiohttp hands the path to yarl, which resolves
dot segments (also percent-encoded ones), so the test parses every built path with yarl too.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.dynamic.resource import Resource
from yarl import URL

from colony.kube.paths import InvalidName, group_version_path, path_segment, resource_path
from colony.kube.resources import Kube

HOST = "https://127.0.0.1:6443"

CRAFTED = [
    "../../other-ns/secrets/x",
    "../x",
    "a/b",
    "..",
    ".",
    "",
    "%2e%2e",
    "%2E%2E",
    "%2e",
    "..%2f..%2fother-ns",
    "%2F",
    "x?watch=true",
    "x#fragment",
    "x?labelSelector=a%3Db",
    "a\\b",
    " ..",
    ".. ",
    "...",
    "x;y",
    "x/../../y",
    "\x00",
    "名前",
]


def _sent_segments(path: str) -> tuple[str, ...]:
    """The decoded path segments the API server receives for `path`."""
    url = URL(HOST + path)
    assert url.query_string == "" and url.fragment == "", (path, url)
    return url.parts[1:]


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_secret_name_stays_a_secret_of_its_namespace(name: str) -> None:
    try:
        path = resource_path("/api/v1", "secrets", name=name, namespace="team-a")
    except InvalidName:
        assert name in ("", ".", "..") or "/" in name
        return
    assert _sent_segments(path) == ("api", "v1", "namespaces", "team-a", "secrets", name)


@pytest.mark.parametrize("namespace", CRAFTED)
def test_crafted_namespace_is_one_segment(namespace: str) -> None:
    try:
        path = resource_path("/apis/infra.exalsius.ai/v1", "colonies", name="c", namespace=namespace)
    except InvalidName:
        assert namespace in (".", "..") or "/" in namespace
        return
    segments = _sent_segments(path)
    if namespace == "":  # no namespace: the cluster-wide path of the same resource
        assert segments == ("apis", "infra.exalsius.ai", "v1", "colonies", "c")
    else:
        assert segments == ("apis", "infra.exalsius.ai", "v1", "namespaces", namespace, "colonies", "c")


@settings(max_examples=500, deadline=None)
@given(name=st.text(), namespace=st.text(min_size=1))
def test_any_name_and_namespace_stay_in_place(name: str, namespace: str) -> None:
    """Arbitrary strings: either refused before any request, or exactly one segment each."""
    try:
        path = resource_path("/api/v1", "secrets", name=name, namespace=namespace, subresource="status")
    except InvalidName:
        assert {name, namespace} & {"", ".", ".."} or "/" in name + namespace
        return
    assert _sent_segments(path) == ("api", "v1", "namespaces", namespace, "secrets", name, "status")


@settings(max_examples=300, deadline=None)
@given(segment=st.text(alphabet=st.sampled_from("./%2eEfF?#;\\a"), max_size=12))
def test_dot_and_percent_soup_never_becomes_a_dot_segment(segment: str) -> None:
    """Strings made of the characters that build traversals, weighted towards them."""
    try:
        quoted = path_segment(segment)
    except InvalidName:
        assert segment in ("", ".", "..") or "/" in segment
        return
    assert _sent_segments(f"/api/v1/namespaces/a/secrets/{quoted}") == (
        "api",
        "v1",
        "namespaces",
        "a",
        "secrets",
        segment,
    )


def test_collection_and_cluster_scoped_paths_are_unchanged() -> None:
    assert resource_path("/api/v1", "nodes") == "/api/v1/nodes"
    assert resource_path("/api/v1", "pods", namespace="ns") == "/api/v1/namespaces/ns/pods"
    assert resource_path("/apis/g.io/v1", "things", name="a.b-c", namespace="ns") == (
        "/apis/g.io/v1/namespaces/ns/things/a.b-c"
    )
    assert resource_path("/apis/g.io/v1", "qs", name="q", subresource="status") == "/apis/g.io/v1/qs/q/status"


def test_a_subresource_needs_a_name() -> None:
    with pytest.raises(InvalidName, match="needs an object name"):
        resource_path("/api/v1", "pods", namespace="ns", subresource="status")


def test_group_version_paths() -> None:
    assert group_version_path("v1") == "/api/v1"
    assert group_version_path("kubeflow.org/v1") == "/apis/kubeflow.org/v1"
    for bad in ("a/../../v1", "../v1", "g/..", "g/", "/v1"):
        with pytest.raises(InvalidName):
            group_version_path(bad)
    assert _sent_segments(group_version_path("g?x=1/v#1")) == ("apis", "g?x=1", "v#1")


def test_invalid_name_message_names_the_part() -> None:
    with pytest.raises(InvalidName, match=re.escape("namespace '..'")):
        resource_path("/api/v1", "secrets", name="x", namespace="..")
    with pytest.raises(InvalidName, match=re.escape("name '../../other-ns/secrets/x'")):
        path_segment("../../other-ns/secrets/x")


class _NoRequests:
    """An ApiClient stand-in that fails the test if any request is made."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call_api(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(path)
        raise AssertionError(f"a request was made: {path}")


def _kube_with_secrets() -> tuple[Kube, _NoRequests]:
    api = _NoRequests()
    kube = Kube(api)  # type: ignore[arg-type]
    secrets = Resource(
        prefix="api", group="", api_version="v1", kind="Secret", namespaced=True, name="secrets"
    )
    kube._resources[("v1", "Secret")] = secrets
    return kube, api


@pytest.mark.parametrize("name", ["../../other-ns/secrets/x", "..", ".", "", "a/b"])
def test_kube_refuses_a_crafted_name_before_any_request(name: str) -> None:
    kube, api = _kube_with_secrets()
    for call in (
        kube.get("v1", "Secret", name, "team-a"),
        kube.delete("v1", "Secret", name, "team-a"),
        kube.patch("v1", "Secret", name, "team-a", {}),
        kube.patch_status("v1", "Secret", name, "team-a", {}),
        kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "team-a"}}),
    ):
        with pytest.raises(InvalidName):
            asyncio.run(call)
    assert api.calls == []


def test_kube_quotes_what_it_sends() -> None:
    kube, _ = _kube_with_secrets()
    path = asyncio.run(kube._path("v1", "Secret", "x?y#z%2e", "team-a"))
    assert path == "/api/v1/namespaces/team-a/secrets/x%3Fy%23z%252e"
