"""What an informer keeps of each object (colony.kube.informer: trimmed, compact)."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from colony.kube.informer import DROPPED_ANNOTATIONS, SHARED_STRING_MAX, compact, trimmed

QUEUED_GPR: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "GPR",
    "metadata": {
        "name": "train-00001",
        "namespace": "team-a",
        "uid": "5f3b2094-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
        "resourceVersion": "123456",
        "generation": 1,
        "creationTimestamp": "2026-12-05T09:22:06Z",
        "labels": {"colony.exalsius.ai/queue": "q"},
        "annotations": {DROPPED_ANNOTATIONS[0]: '{"spec": {"numberOfGPUs": 1}}'},
        "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {"gpuShape": "NVIDIA-H100-80GB-HBM3", "numberOfGPUNodes": 1, "numberOfGPUs": 1, "priority": 0},
    "status": {
        "phase": "Queued",
        "message": "waiting: quota of queue team-a/q is used (8/8 GPUs)",
        "position": 4211,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "SpecValid",
                "message": "The spec is valid and the operator is reconciling it.",
                "lastTransitionTime": "2026-12-05T09:22:06Z",
            },
            {
                "type": "Admitted",
                "status": "False",
                "reason": "Waiting",
                "message": "waiting: quota of queue team-a/q is used",
                "lastTransitionTime": "2026-12-05T09:22:06Z",
            },
        ],
    },
}


def _events(count: int) -> list[dict[str, Any]]:
    """`count` versions of the GPR, each parsed on its own as a watch event is."""
    raw = json.dumps(QUEUED_GPR)
    return [json.loads(raw.replace("00001", f"{i:05d}")) for i in range(count)]


def test_trimmed_drops_what_only_the_api_server_and_kopf_read_and_keeps_the_rest_equal() -> None:
    stored = trimmed(QUEUED_GPR)
    assert "managedFields" not in stored["metadata"]
    assert stored["metadata"]["annotations"] == {}
    assert stored["spec"] == QUEUED_GPR["spec"] and stored["status"] == QUEUED_GPR["status"]
    assert QUEUED_GPR["metadata"]["managedFields"]  # the input is not changed


def test_compact_shares_keys_and_short_strings_between_objects_but_not_long_ones() -> None:
    first, second = (compact(event) for event in _events(2))
    assert first == _events(1)[0]
    key_a, key_b = (next(k for k in obj["status"] if k == "phase") for obj in (first, second))
    assert key_a is key_b
    assert first["status"]["conditions"][0]["reason"] is second["status"]["conditions"][0]["reason"]
    long_value = "x" * (SHARED_STRING_MAX + 1)
    assert compact({"a": long_value})["a"] is long_value  # kept as it is, not interned


def test_compacted_objects_take_less_than_half_the_memory() -> None:
    def stored_bytes(keep: Any) -> int:
        tracemalloc.start()
        try:
            kept = [keep(event) for event in _events(2000)]
            size, _ = tracemalloc.get_traced_memory()
            assert len(kept) == 2000
            return size
        finally:
            tracemalloc.stop()

    plain, compacted = stored_bytes(lambda event: event), stored_bytes(compact)
    assert compacted < plain / 2, (plain, compacted)
