"""Pure: pick the cluster of a colony that a job fits on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def free_gpus(cluster: Mapping[str, Any], used: int) -> int:
    """Allocatable GPUs of a colony status cluster entry, minus what running pods request."""
    return sum(int(g.get("allocatable", 0)) for g in cluster.get("gpus") or []) - used


def choose_cluster(
    clusters: Sequence[Mapping[str, Any]], used: Mapping[str, int], needed_gpus: int
) -> tuple[str | None, str]:
    """The Ready cluster with the most free GPUs that fits `needed_gpus` (ties: spec order).

    Returns (cluster name, why); the name is None when nothing fits, and `why` says what is missing.
    """
    ready = [c for c in clusters if c.get("phase") == "Ready"]
    if not ready:
        return None, "no cluster of the colony is Ready"
    fitting = [c for c in ready if free_gpus(c, used.get(c["name"], 0)) >= needed_gpus]
    if not fitting:
        best = max(free_gpus(c, used.get(c["name"], 0)) for c in ready)
        return None, f"needs {needed_gpus} GPU(s); the most free in one Ready cluster is {best}"
    chosen = max(fitting, key=lambda c: free_gpus(c, used.get(c["name"], 0)))
    return str(chosen["name"]), f"{free_gpus(chosen, used.get(chosen['name'], 0))} GPU(s) free"
