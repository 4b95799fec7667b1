"""Shared building blocks of every custom resource model: camelCase aliases, conditions, metadata."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict


class ApiModel(BaseModel):
    """Base of every spec/status model: Python snake_case attributes, camelCase on the wire.

    Unknown fields are ignored here because the API server already rejects them at admission
    (strict field validation) or prunes them; the operator must never crash on a newer object.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def to_wire(self) -> dict[str, Any]:
        """Serialise with camelCase keys, leaving out unset optional fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""An object name (RFC 1123 subdomain, at most 253 characters): what a request path may carry."""
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace, or a name that becomes a label value or the prefix of other names (<= 63)."""
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
"""A label value (at most 63 characters, may be empty)."""
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
"""A key of a Secret's data (at most 253 characters)."""
COLONY_REFERENCE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
"""A colony named `name` (same namespace) or `namespace/name`."""
GPU_TYPE_PATTERN = r"^(\*|[A-Za-z0-9][A-Za-z0-9_. -]*)$"
"""One GPU type (no comma: a list is a list, not one string); `*` stands for every type."""

MAX_NAME = 253
MAX_LABEL = 63
MAX_COLONY_REFERENCE = MAX_LABEL + 1 + MAX_NAME


def object_name(description: str, *, max_length: int = MAX_NAME) -> Any:
    """A required field naming an object: a DNS subdomain (a DNS label when `max_length` <= 63)."""
    pattern = DNS_LABEL_PATTERN if max_length <= MAX_LABEL else DNS_SUBDOMAIN_PATTERN
    return Field(min_length=1, max_length=max_length, pattern=pattern, description=description)


NAME_IS_A_LABEL_VALUE = (
    "size(self.metadata.name) <= 63",
    "metadata.name may have at most 63 characters: it becomes a label value",
)
"""The root rule of kinds whose name the operator puts into a label value (63 characters at most)."""


def cel_rules(*rules: tuple[str, str]) -> JsonDict:
    """`json_schema_extra` with CEL validation rules, each given as (rule, message)."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message} for rule, message in rules]}


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(ApiModel):
    """One aspect of the object's state, following the Kubernetes API conventions."""

    type: str = Field(description="Type of condition in CamelCase, e.g. Ready or Reconciled.")
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    reason: str = Field(
        default="",
        description="Machine-readable CamelCase reason for the condition's last transition.",
    )
    message: str = Field(default="", description="Human-readable details about the last transition.")
    last_transition_time: datetime | None = Field(
        default=None, description="When the condition last changed from one status to another."
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation the condition was computed from."
    )


class LocalObjectReference(ApiModel):
    """A reference to an object by name in the same namespace."""

    name: str = object_name("Name of the referenced object, in the referrer's namespace.")


class SecretKeyReference(ApiModel):
    """A reference to one key of a Secret in the same namespace (there is no namespace field: a
    tenant's object never names another namespace's Secret)."""

    name: str = object_name("Name of the Secret, in the referrer's namespace (a DNS subdomain).")
    key: str = Field(
        default="value",
        min_length=1,
        max_length=MAX_NAME,
        pattern=SECRET_KEY_PATTERN,
        description="Key inside the Secret's data.",
    )


LabelValue = Annotated[str, Field(max_length=MAX_LABEL, pattern=LABEL_VALUE_PATTERN)]
"""A label value, e.g. of a selector's matchLabels."""
GpuType = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_LABEL,
        pattern=GPU_TYPE_PATTERN,
        description='One GPU type, e.g. H100 or A100-80GB; "*" accepts every type.',
    ),
]
"""One GPU type (as in the nvidia.com/gpu.product node label), never a comma-separated list."""
ColonyReference = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_COLONY_REFERENCE,
        pattern=COLONY_REFERENCE_PATTERN,
        description="`name` (a colony in the same namespace) or `namespace/name`.",
    ),
]
"""A colony named by `name` or `namespace/name`."""


class LabelSelector(ApiModel):
    """A label query over objects (the matchLabels subset of metav1.LabelSelector)."""

    match_labels: dict[str, LabelValue] = Field(
        default_factory=dict,
        description="Labels an object must carry, all of them, to be selected (values are label values).",
    )


@dataclass(frozen=True)
class PrinterColumn:
    """An additionalPrinterColumn of a CRD (what `kubectl get` shows)."""

    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0


@dataclass(frozen=True)
class ResourceDefinition:
    """Everything needed to generate and address one custom resource type."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    spec_model: type[ApiModel]
    status_model: type[ApiModel]
    description: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ("exalsius",)
    printer_columns: tuple[PrinterColumn, ...] = ()
    scope: Literal["Namespaced", "Cluster"] = "Namespaced"
    root_rules: tuple[tuple[str, str], ...] = ()
    """CEL rules (rule, message) on the whole object, e.g. on metadata.name (the only metadata CEL
    sees besides generateName)."""

    @property
    def crd_name(self) -> str:
        """The CustomResourceDefinition's metadata.name, `<plural>.<group>`."""
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        """The apiVersion of objects of this kind, `<group>/<version>`."""
        return f"{self.group}/{self.version}"


class ResourceStatus(ApiModel):
    """Status fields every colony-operator resource has."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation that the operator last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Current state of the object as Kubernetes conditions (Reconciled, Ready, ...).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
