"""Shared building blocks of every custom resource model: camelCase aliases, conditions, metadata."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

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

    name: str = Field(min_length=1, description="Name of the referenced object.")


class SecretKeyReference(ApiModel):
    """A reference to one key of a Secret in the same namespace."""

    name: str = Field(min_length=1, description="Name of the Secret.")
    key: str = Field(default="value", min_length=1, description="Key inside the Secret's data.")


class LabelSelector(ApiModel):
    """A label query over objects (the matchLabels subset of metav1.LabelSelector)."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels an object must carry, all of them, to be selected."
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
