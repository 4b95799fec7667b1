"""The k8sVersion mapping per component, and deterministic hosted control-plane NodePorts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colony.render import HostedControlPlanePorts, allocate_hosted_ports
from colony.render.k8s_versions import KubernetesVersion
from colony.render.ports import NODE_PORT_MAX, NODE_PORT_MIN, hosted_ports_key


def test_version_is_spelled_per_component() -> None:
    version = KubernetesVersion.parse("v1.30.3")
    assert version.capi == "v1.30.3"
    assert version.k0s == "v1.30.3+k0s.0"
    assert version.k0s_image_tag == "v1.30.3-k0s.0"
    assert KubernetesVersion.parse("v1.27.2").k0s_image_tag == "v1.27.2-k0s.0"


@pytest.mark.parametrize("text", ["1.30.3", "v1.30", "v2.0.1", "v1.30.3+k0s.0", "v1.030.3", "", "v1.30.3 "])
def test_malformed_versions_are_rejected_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"v1\.<minor>\.<patch>"):
        KubernetesVersion.parse(text)


def test_ports_are_deterministic_distinct_and_in_range() -> None:
    key = hosted_ports_key("team-a", "dev", "gpu")
    assert key == "team-a/dev/gpu"
    ports = allocate_hosted_ports(key, set())
    assert ports == allocate_hosted_ports(key, set())
    assert ports.api != ports.konnectivity
    assert NODE_PORT_MIN <= ports.api <= NODE_PORT_MAX
    assert NODE_PORT_MIN <= ports.konnectivity <= NODE_PORT_MAX
    assert allocate_hosted_ports("team-a/dev/other", set()) != ports


def _successor(port: int) -> int:
    return port + 1 if port < NODE_PORT_MAX else NODE_PORT_MIN


def test_used_ports_are_probed_past() -> None:
    free = allocate_hosted_ports("k", set())
    moved = allocate_hosted_ports("k", {free.api})
    assert moved.api == _successor(free.api)
    if free.konnectivity != moved.api:
        assert moved.konnectivity == free.konnectivity
    both_taken = allocate_hosted_ports("k", {free.api, free.konnectivity})
    assert {both_taken.api, both_taken.konnectivity}.isdisjoint({free.api, free.konnectivity})


def test_konnectivity_never_equals_api_even_when_both_hash_to_one_port() -> None:
    all_but_two = set(range(NODE_PORT_MIN, NODE_PORT_MAX + 1)) - {30000, 32767}
    ports = allocate_hosted_ports("k", all_but_two)
    assert {ports.api, ports.konnectivity} == {30000, 32767}


def test_exhausted_range_is_an_error() -> None:
    with pytest.raises(ValueError, match="no free NodePort"):
        allocate_hosted_ports("k", set(range(NODE_PORT_MIN, NODE_PORT_MAX)))


@given(
    key=st.text(min_size=1, max_size=80),
    used=st.sets(st.integers(NODE_PORT_MIN, NODE_PORT_MAX), max_size=400),
)
def test_allocation_properties(key: str, used: set[int]) -> None:
    ports = allocate_hosted_ports(key, used)
    assert isinstance(ports, HostedControlPlanePorts)
    assert ports.api != ports.konnectivity
    assert ports.api not in used and ports.konnectivity not in used
    assert all(NODE_PORT_MIN <= port <= NODE_PORT_MAX for port in (ports.api, ports.konnectivity))
    assert allocate_hosted_ports(key, frozenset(used)) == ports
