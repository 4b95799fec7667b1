"""Deterministic NodePorts for hosted (k0smotron) control planes.

The reference operator picked two random free ports on every reconcile and could pick the same one
twice. Here the ports derive from a stable hash of the cluster's key, so a re-run (or a restarted
operator) computes the same pair; the controller records them in status and passes them back in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Set

from colony.render.contract import HostedControlPlanePorts

NODE_PORT_MIN = 30000
NODE_PORT_MAX = 32767
_RANGE = NODE_PORT_MAX - NODE_PORT_MIN + 1


def hosted_ports_key(namespace: str, colony: str, cluster_name: str) -> str:
    """The allocation key of one colony cluster: `<namespace>/<colony>/<clusterName>`."""
    return f"{namespace}/{colony}/{cluster_name}"


def allocate_hosted_ports(key: str, used: Set[int]) -> HostedControlPlanePorts:
    """Two distinct NodePorts (API server, konnectivity) for `key`, none of them in `used`.

    Each port starts at a position derived from sha256(key) and probes forward (wrapping around
    the NodePort range 30000-32767) past ports in `used`; the konnectivity port also skips the API
    port. Pure and deterministic. Raises ValueError when fewer than two ports are free.
    """
    digest = hashlib.sha256(key.encode()).digest()
    api = _probe(int.from_bytes(digest[:8], "big"), used)
    konnectivity = _probe(int.from_bytes(digest[8:16], "big"), {*used, api})
    return HostedControlPlanePorts(api=api, konnectivity=konnectivity)


def _probe(seed: int, used: Set[int]) -> int:
    start = seed % _RANGE
    for step in range(_RANGE):
        port = NODE_PORT_MIN + (start + step) % _RANGE
        if port not in used:
            return port
    raise ValueError(f"no free NodePort left in {NODE_PORT_MIN}-{NODE_PORT_MAX}")
