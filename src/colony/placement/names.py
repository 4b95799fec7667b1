"""Labels, annotations, the finalizer and object names of placement (one home for each)."""

from __future__ import annotations

import hashlib
import re

from colony.labels import PLACEMENT_PREFIX

PREFIX = PLACEMENT_PREFIX
ENABLED_LABEL = PREFIX + "enabled"
"""On a framework object: "true" places it without a policy, "false" keeps every policy off it."""
FINALIZER = PREFIX + "finalizer"
"""On a placed object: its copy and GPU request are deleted before it goes."""

# Annotations on the original object (management cluster): where it runs and how it is doing.
COLONY_ANNOTATION = PREFIX + "colony"
"""`namespace/name` of the colony the copy runs on."""
CLUSTER_ANNOTATION = PREFIX + "cluster"
"""The colony's cluster holding the copy."""
PHASE_ANNOTATION = PREFIX + "phase"
"""Queued, Unplaceable, then the copy's standard phase: Pending, Running, Succeeded or Failed."""
MESSAGE_ANNOTATION = PREFIX + "message"
"""Why the object is in its phase (waiting for GPUs, colonies excluded and why, ...)."""
GENERATION_ANNOTATION = PREFIX + "placed-generation"
"""metadata.generation of the original that the copy was last written from."""
REQUEST_ANNOTATION = PREFIX + "gpu-request"
"""The GPU Provisioning Request the object waits on or runs with."""
COPIES_ANNOTATION = PREFIX + "copies"
"""spread Duplicate: JSON of the copies by colony (`namespace/name`): cluster, phase, generation."""
CLEANUP_FAILURES_ANNOTATION = PREFIX + "cleanup-failures"
"""While the object is being deleted: JSON of its failed cleanup tries on colony clusters (`tries`,
`at`: the last one's time, `error`: its message), bounded by colony.scheduling.cleanup."""
OWN_ANNOTATIONS = (
    COLONY_ANNOTATION,
    COPIES_ANNOTATION,
    CLUSTER_ANNOTATION,
    PHASE_ANNOTATION,
    MESSAGE_ANNOTATION,
    GENERATION_ANNOTATION,
    REQUEST_ANNOTATION,
    CLEANUP_FAILURES_ANNOTATION,
)

# Labels on the GPU Provisioning Requests placement creates.
WORKLOAD_KIND_LABEL = PREFIX + "workload-kind"
WORKLOAD_NAME_LABEL = PREFIX + "workload"
"""The object's name (hashed when longer than a label value may be); on a group's request: absent."""
GROUP_LABEL = PREFIX + "group"
"""The group (groupBy label value, hashed) of a group's request."""
MEMBERS_ANNOTATION = PREFIX + "members"
"""Comma-separated `Kind/name` of the objects a request is for."""

# On the copy in the colony cluster.
ORIGIN_UID_LABEL = PREFIX + "origin-uid"
"""The uid of the original object: the copy is ours, and whose."""
ORIGIN_ANNOTATION = PREFIX + "origin"
"""`namespace/name` of the original in the management cluster."""

FINISHED_PHASES = ("Succeeded", "Failed")
MAX_NAME = 63
_NOT_NAME = re.compile(r"[^a-z0-9-]+")


def _hash(text: str, length: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _dns_label(text: str, salt: str) -> str:
    """`text` as a DNS label of at most MAX_NAME characters (cut and hashed when too long or when it
    had to be changed)."""
    clean = _NOT_NAME.sub("-", text.lower()).strip("-")
    if clean == text and len(clean) <= MAX_NAME:
        return clean
    return f"{clean[: MAX_NAME - 11].rstrip('-')}-{_hash(salt)}"


def label_value(text: str) -> str:
    """`text` as a label value (at most 63 characters; hashed when longer)."""
    return text if len(text) <= MAX_NAME else f"{text[:52]}-{_hash(text)}"


def request_name(kind: str, name: str) -> str:
    """The GPU Provisioning Request of one object: `<kind>-<name>`, e.g. pytorchjob-train."""
    return _dns_label(f"{kind.lower()}-{name}", f"{kind}/{name}")


def duplicate_request_name(kind: str, name: str, colony: str, namespace: str) -> str:
    """The GPU Provisioning Request of one object's copy on one colony (spread Duplicate):
    `<kind>-<name>--<colony>`, e.g. pytorchjob-train--rich (`--<colony namespace>-<colony>` when the
    colony is another namespace's)."""
    colony_namespace, colony_name = colony.split("/", 1)
    where = colony_name if colony_namespace == namespace else f"{colony_namespace}-{colony_name}"
    return _dns_label(f"{kind.lower()}-{name}--{where}", f"{kind}/{name}@{colony}")


def group_request_name(policy: str, label_key: str, value: str) -> str:
    """The GPU Provisioning Request of a group: `group-<value>` (hashed when not a DNS label)."""
    return _dns_label(f"group-{value}", f"{policy}/{label_key}={value}")


def group_id(policy: str, label_key: str, value: str) -> str:
    """The group's label value on its request."""
    return _hash(f"{policy}/{label_key}={value}", 16)


def member(kind: str, name: str) -> str:
    """How a request lists one of its objects."""
    return f"{kind}/{name}"
