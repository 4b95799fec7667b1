"""Generate CustomResourceDefinitions from the pydantic models (`colony crds` writes crds/*.yaml).

Pydantic emits JSON Schema; Kubernetes wants a *structural* OpenAPI v3 schema. The conversion:
references are inlined, `Optional[X]` (anyOf X/null) becomes X, titles are dropped, and
`additionalProperties: false` is removed (unknown fields are rejected by the API server's strict
field validation instead). `x-kubernetes-*` keys given in `json_schema_extra` pass through.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from colony.api.base import ResourceDefinition, cel_rules

_DROPPED_KEYS = {"title", "$defs", "discriminator"}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Return `node` with every $ref replaced by a copy of its definition (recursively)."""
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**target, **extra}, defs)
    return {key: _inline(value, defs) for key, value in node.items()}


def _structural(node: Any) -> Any:
    """Rewrite an inlined JSON Schema node into a structural OpenAPI v3 node."""
    if isinstance(node, list):
        return [_structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    any_of = node.pop("anyOf", None)
    if any_of is not None and sorted(o.get("type", "") for o in any_of) == ["integer", "string"]:
        node["x-kubernetes-int-or-string"] = True
        any_of = None
    if any_of is not None:
        non_null = [option for option in any_of if option.get("type") != "null"]
        if len(non_null) != 1:
            raise ValueError(f"cannot express a union of {len(non_null)} types in a CRD schema: {any_of}")
        outer = {k: v for k, v in node.items() if k not in ("default",) or v is not None}
        node = {**non_null[0], **outer}
    if node.get("default", 0) is None:
        del node["default"]
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]
    if node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" in node:
        del node["additionalProperties"]
    for key in _DROPPED_KEYS:
        node.pop(key, None)
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        # JSON Schema 2020 writes `exclusiveMinimum: 0`; OpenAPI v3 (CRDs) wants `minimum: 0` + a flag.
        if isinstance(node.get(bound), int | float) and not isinstance(node[bound], bool):
            node[inclusive] = node[bound]
            node[bound] = True
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            result[key] = {name: _structural(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            result[key] = _structural(value)
        else:
            result[key] = value
    return result


def model_schema(model: type[Any]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a pydantic model, as the API server expects it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    schema = _structural(_inline(raw, defs))
    if not isinstance(schema, dict):
        raise TypeError("a model schema must be an object")
    return schema


def crd_for(resource: ResourceDefinition) -> dict[str, Any]:
    """Build the full CustomResourceDefinition manifest of one resource."""
    spec_schema = model_schema(resource.spec_model)
    status_schema = model_schema(resource.status_model)
    version = {
        "name": resource.version,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {
                "name": column.name,
                "type": column.type,
                "jsonPath": column.json_path,
                "description": column.description,
                **({"priority": column.priority} if column.priority else {}),
            }
            for column in resource.printer_columns
        ],
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": resource.description,
                **(cel_rules(*resource.root_rules) if resource.root_rules else {}),
                "required": ["spec"],
                "properties": {
                    "apiVersion": {"type": "string", "description": "Versioned schema of this object."},
                    "kind": {"type": "string", "description": "REST resource this object represents."},
                    "metadata": {"type": "object"},
                    "spec": spec_schema,
                    "status": status_schema,
                },
            }
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": resource.crd_name,
            "labels": {"app.kubernetes.io/part-of": "colony-operator"},
        },
        "spec": {
            "group": resource.group,
            "scope": resource.scope,
            "names": {
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
                "plural": resource.plural,
                "singular": resource.singular,
                "shortNames": list(resource.short_names),
                "categories": list(resource.categories),
            },
            "versions": [version],
        },
    }


def crd_file_name(resource: ResourceDefinition) -> str:
    """File name of a resource's CRD in crds/, `<group>_<plural>.yaml` like controller-gen."""
    return f"{resource.group}_{resource.plural}.yaml"


def render_crd_yaml(resource: ResourceDefinition) -> str:
    """The CRD of one resource as the YAML text stored in crds/."""
    header = "# Generated from colony.api by `colony crds`; do not edit by hand.\n"
    return header + yaml.safe_dump(crd_for(resource), sort_keys=False, width=100)


def write_crds(resources: tuple[ResourceDefinition, ...], directory: Path) -> list[Path]:
    """Write one YAML file per resource into `directory`; returns the written paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for resource in resources:
        path = directory / crd_file_name(resource)
        path.write_text(render_crd_yaml(resource))
        written.append(path)
    return written
