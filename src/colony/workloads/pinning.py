"""Copies of framework custom resources for another cluster: pinned to nodes, server fields removed.

`pin_to_nodes` finds every pod template of an object with jq's `path(...)` of the definition's
expressions (for a component with instances, `path(instancesPath | podTemplatePath)`), so it works
for any definition without code. It writes there like jq's `setpath`, but in Python on a deep copy:
that keeps every other value exactly as it was (no JSON round trip of the whole object).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from colony.workloads import jqexpr
from colony.workloads.definition import WorkloadDefinition, evaluate

SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "managedFields",
    "creationTimestamp",
    "generation",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
"""metadata fields the API server sets (or that tie an object to its cluster): not copied."""

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


def pod_template_paths(definition: WorkloadDefinition, obj: Mapping[str, Any]) -> list[list[jqexpr.PathKey]]:
    """The paths of every pod template present in the object (null templates are left out), in order.

    Raises `EvaluationError` when an expression fails on the object or is not a path expression.
    """
    found: list[list[jqexpr.PathKey]] = []
    for index, component in enumerate(definition.components):
        where = f"spec.components[{index}]"
        if component.instances_path is None:
            expression, field = component.pod_template_path, f"{where}.podTemplatePath"
        else:
            expression = f"({component.instances_path}) | ({component.pod_template_path})"
            field = f"{where}.instancesPath | podTemplatePath"
        for path in evaluate(definition, field, f"path({expression})", obj, obj):
            path = list(path)
            if path not in found and isinstance(jqexpr.get_path(obj, path), Mapping):
                found.append(path)
    return found


def _merge_tolerations(existing: Any, extra: Sequence[Mapping[str, Any]]) -> list[Any]:
    merged = list(existing) if isinstance(existing, list) else []
    for toleration in extra:
        if dict(toleration) not in merged:
            merged.append(dict(toleration))
    return merged


def pin_template(
    template: dict[str, Any], node_selector: Mapping[str, str], tolerations: Sequence[Mapping[str, Any]]
) -> None:
    """Merge the node selector into a PodTemplateSpec (ours win) and append missing tolerations."""
    spec = template.get("spec")
    if not isinstance(spec, dict):
        spec = template["spec"] = {}
    if node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **node_selector}
    if tolerations:
        spec["tolerations"] = _merge_tolerations(spec.get("tolerations"), tolerations)


def pin_to_nodes(
    definition: WorkloadDefinition,
    obj: Mapping[str, Any],
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A deep copy of `obj` (plain dicts and lists) with every pod template pinned to the nodes.

    Existing node selector entries are kept unless `node_selector` sets the same key; tolerations
    are appended unless an equal one is already there. Nothing else changes.
    """
    pinned: dict[str, Any] = jqexpr.plain(obj)
    return pin_at_paths(pinned, pod_template_paths(definition, pinned), node_selector, tolerations)


def pin_at_paths(
    obj: Mapping[str, Any],
    paths: Sequence[Sequence[jqexpr.PathKey]],
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """`pin_to_nodes` with the pod template paths already found (`pod_template_paths`, computed
    where user expressions run bounded); paths that lead to no mapping are skipped."""
    pinned: dict[str, Any] = jqexpr.plain(obj)
    for path in paths:
        template = jqexpr.get_path(pinned, path)
        if isinstance(template, dict):
            pin_template(template, node_selector, tolerations)
    return pinned


def strip_for_copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy without status and server-set metadata, ready to create in another cluster.

    Removed: `status`, metadata `uid`, `resourceVersion`, `managedFields`, `creationTimestamp`,
    `generation`, `ownerReferences`, `finalizers`, `deletionTimestamp`,
    `deletionGracePeriodSeconds`, `selfLink`, and kubectl's last-applied-configuration annotation.
    Name, namespace, generateName, labels and the other annotations stay.
    """
    copied: dict[str, Any] = jqexpr.plain(obj)
    copied.pop("status", None)
    metadata = copied.get("metadata")
    if isinstance(metadata, dict):
        for key in SERVER_SET_METADATA:
            metadata.pop(key, None)
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED_ANNOTATION, None)
            if not annotations:
                del metadata["annotations"]
    return copied
