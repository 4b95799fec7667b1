"""The WorkloadDefinition resource: how to read any framework's custom resource (Run:ai Karta's idea).

A WorkloadDefinition tells the operator, for one framework kind (PyTorchJob, RayJob, JobSet, ...),
where the pod templates are, how many pods each one stands for, how the kind's status maps to
Pending/Running/Succeeded/Failed and which components must be scheduled together. Every path is a
jq expression evaluated on the custom resource (or on one instance of a component, see
`instancesPath`). The operator ships definitions for common kinds (colony/data/workload-definitions);
users add their own by applying one, with no code change.

These are the wire models only; `colony.workloads.definition` compiles and checks the expressions.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from colony.api.base import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    MAX_LABEL,
    MAX_NAME,
    ApiModel,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    cel_rules,
)

NAME_PATTERN = DNS_LABEL_PATTERN
KIND_PATTERN = r"^[A-Za-z][A-Za-z0-9]*$"

_MATCHER_RULES = cel_rules(
    (
        "(has(self.phase) ? 1 : 0) + (has(self.conditions) ? 1 : 0) + (has(self.expression) ? 1 : 0) == 1",
        "a matcher sets exactly one of phase, conditions or expression",
    ),
)
_COMPONENT_RULES = cel_rules(
    (
        "!has(self.instanceNamePath) || has(self.instancesPath)",
        "instanceNamePath needs instancesPath",
    ),
)


class TargetKind(ApiModel):
    """The framework kind a definition describes."""

    group: str = Field(
        min_length=1,
        max_length=MAX_NAME,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="API group of the kind, e.g. kubeflow.org.",
    )
    version: str = Field(
        min_length=1,
        max_length=MAX_LABEL,
        pattern=DNS_LABEL_PATTERN,
        description="API version of the kind, e.g. v1.",
    )
    kind: str = Field(
        min_length=1, max_length=MAX_LABEL, pattern=KIND_PATTERN, description="Kind, e.g. PyTorchJob."
    )
    plural: str = Field(
        min_length=1,
        max_length=MAX_LABEL,
        pattern=DNS_LABEL_PATTERN,
        description="Plural resource name, e.g. pytorchjobs.",
    )


class ComponentDefinition(ApiModel):
    """One kind of pod the workload creates (a replica type, a worker group, a replicated job)."""

    model_config = ConfigDict(json_schema_extra=_COMPONENT_RULES)

    name: str = Field(
        pattern=NAME_PATTERN, max_length=63, description="Name of the component, unique in the definition."
    )
    pod_template_path: str = Field(
        min_length=1,
        description="jq expression yielding the component's PodTemplateSpec (relative to the instance "
        "when instancesPath is set), e.g. .spec.pytorchReplicaSpecs.Worker.template. It must be a path "
        "expression (the operator writes node selectors there). A null result means the component is "
        "absent from this object.",
    )
    replicas_path: str = Field(
        default="1",
        min_length=1,
        description="jq expression yielding the number of pods from this template (relative to the "
        "instance when instancesPath is set), e.g. .spec.pytorchReplicaSpecs.Worker.replicas // 1.",
    )
    instances_path: str | None = Field(
        default=None,
        min_length=1,
        description="jq expression yielding each instance of the component, e.g. .spec.replicatedJobs[]; "
        "podTemplatePath and replicasPath are then evaluated on every instance.",
    )
    instance_name_path: str | None = Field(
        default=None,
        min_length=1,
        description="jq expression naming an instance, evaluated on the instance, e.g. .name; "
        "default: the instance's index.",
    )


class ConditionMatcher(ApiModel):
    """A condition that must be present with the given status."""

    type: str = Field(min_length=1, description="Condition type, e.g. Succeeded.")
    status: str = Field(default="True", description="Condition status: True, False or Unknown.")


class StatusMatcher(ApiModel):
    """One way to recognise a phase; exactly one of phase, conditions or expression."""

    model_config = ConfigDict(json_schema_extra=_MATCHER_RULES)

    phase: str | None = Field(
        default=None, description="Matches when the value at the status phasePath equals this string."
    )
    conditions: list[ConditionMatcher] | None = Field(
        default=None,
        description="Matches when every listed condition is present with its status (at conditionsPath).",
    )
    expression: str | None = Field(
        default=None,
        min_length=1,
        description="jq expression evaluated on the whole object; matches when it yields `expected`.",
    )
    expected: Any = Field(
        default=True,
        description="Value the expression must yield (default true).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class StatusMappings(ApiModel):
    """Matchers per standard phase; checked in the order failed, succeeded, running, pending."""

    pending: list[StatusMatcher] = Field(default_factory=list, description="Matchers of Pending.")
    running: list[StatusMatcher] = Field(default_factory=list, description="Matchers of Running.")
    succeeded: list[StatusMatcher] = Field(default_factory=list, description="Matchers of Succeeded.")
    failed: list[StatusMatcher] = Field(default_factory=list, description="Matchers of Failed.")


class StatusDefinition(ApiModel):
    """Where the kind keeps its status and how it maps to Pending/Running/Succeeded/Failed."""

    conditions_path: str | None = Field(
        default=".status.conditions",
        min_length=1,
        description="jq expression yielding the list of conditions (objects with type and status).",
    )
    phase_path: str | None = Field(
        default=None,
        min_length=1,
        description="jq expression yielding the kind's own phase or state string, e.g. .status.state.",
    )
    mappings: StatusMappings = Field(
        default_factory=StatusMappings,
        description="Matchers per phase; no match means Pending.",
    )


class GangGroup(ApiModel):
    """Components whose pods are scheduled all or nothing."""

    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="Name of the gang.")
    members: list[str] = Field(min_length=1, description="Names of the components in the gang.")


class WorkloadDefinitionSpec(ApiModel):
    """How to read one framework kind: pod templates, replica counts, status, gangs."""

    target: TargetKind = Field(description="The framework kind this definition describes.")
    addon: str | None = Field(
        default=None,
        max_length=MAX_LABEL,
        pattern=DNS_LABEL_PATTERN,
        description="Colony add-on (workloadDependency) that installs the framework's CRD and "
        "controller, e.g. kuberay; named in messages when a colony lacks the kind.",
    )
    components: list[ComponentDefinition] = Field(
        min_length=1,
        max_length=32,
        description="The kinds of pod the workload creates.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    status: StatusDefinition = Field(
        default_factory=StatusDefinition, description="How the kind's status maps to standard phases."
    )
    gang_groups: list[GangGroup] = Field(
        default_factory=list,
        max_length=32,
        description="Components scheduled all or nothing; default: all components form one gang.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class WorkloadDefinitionStatus(ResourceStatus):
    """Observed state of a WorkloadDefinition (whether the operator accepted it)."""

    message: str | None = Field(default=None, description="Why the definition was rejected, if it was.")


WORKLOAD_DEFINITION = ResourceDefinition(
    group="infra.exalsius.ai",
    version="v1",
    kind="WorkloadDefinition",
    plural="workloaddefinitions",
    singular="workloaddefinition",
    short_names=("wd",),
    spec_model=WorkloadDefinitionSpec,
    status_model=WorkloadDefinitionStatus,
    scope="Cluster",
    description="A WorkloadDefinition tells the operator how to read one framework kind (where its pod "
    "templates and replica counts are, how its status maps to standard phases, which components form "
    "a gang) so that custom resources of that kind can be placed on colonies without code changes.",
    printer_columns=(
        PrinterColumn("Group", "string", ".spec.target.group", "API group of the described kind."),
        PrinterColumn("Kind", "string", ".spec.target.kind", "The described kind."),
        PrinterColumn("Addon", "string", ".spec.addon", "Colony add-on that installs the framework."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
