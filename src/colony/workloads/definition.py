"""WorkloadDefinitions: the models, loading with validation, and the registry of known kinds.

The wire models (spec of the `infra.exalsius.ai/v1` WorkloadDefinition custom resource) live in
`colony.api.workloaddefinition` with the other CRDs and are re-exported here. This module adds what
the API server cannot check: every jq expression compiles, pod template and instance paths are
path expressions, component names are unique and gang members exist. A definition that passes is a
`WorkloadDefinition`; one that does not raises `DefinitionError` naming the definition and the field.

Built-in definitions are data files, `colony/data/workload-definitions/*.yaml`, each a manifest in
the same format a user applies. `DefinitionRegistry` holds the built-ins plus user-supplied ones; a
user definition for the same group and kind as a built-in replaces it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import ValidationError

from colony.api.workloaddefinition import (
    WORKLOAD_DEFINITION,
    ComponentDefinition,
    ConditionMatcher,
    GangGroup,
    StatusDefinition,
    StatusMappings,
    StatusMatcher,
    TargetKind,
    WorkloadDefinitionSpec,
    WorkloadDefinitionStatus,
)
from colony.workloads import jqexpr

BUILTIN_RESOURCE = ("data", "workload-definitions")
"""Where the shipped definitions are, inside the `colony` package."""

DEFAULT_GANG = "all"
"""Name of the single gang formed by all components when a definition names none."""

__all__ = [
    "BUILTIN_RESOURCE",
    "DEFAULT_GANG",
    "WORKLOAD_DEFINITION",
    "ComponentDefinition",
    "ConditionMatcher",
    "DefinitionError",
    "DefinitionRegistry",
    "EvaluationError",
    "GangGroup",
    "StatusDefinition",
    "StatusMappings",
    "StatusMatcher",
    "TargetKind",
    "WorkloadDefinition",
    "WorkloadDefinitionSpec",
    "WorkloadDefinitionStatus",
    "definition_from_manifest",
    "describe_object",
    "evaluate",
    "expression_fields",
    "expression_problem",
    "load_builtin_definitions",
    "spec_fingerprint",
]


class DefinitionError(ValueError):
    """A WorkloadDefinition is invalid; the message names the definition and every bad field."""


class EvaluationError(ValueError):
    """An expression of a valid definition failed on one object (the message names both)."""


@dataclass(frozen=True)
class WorkloadDefinition:
    """A validated definition of one framework kind. Treat `spec` as read-only."""

    name: str
    spec: WorkloadDefinitionSpec
    builtin: bool = False

    @property
    def group(self) -> str:
        """API group of the described kind."""
        return self.spec.target.group

    @property
    def version(self) -> str:
        """API version of the described kind."""
        return self.spec.target.version

    @property
    def kind(self) -> str:
        """The described kind."""
        return self.spec.target.kind

    @property
    def plural(self) -> str:
        """Plural resource name of the described kind."""
        return self.spec.target.plural

    @property
    def api_version(self) -> str:
        """`<group>/<version>` of the described kind."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """Name of the described kind's CustomResourceDefinition, `<plural>.<group>`."""
        return f"{self.plural}.{self.group}"

    @property
    def addon(self) -> str | None:
        """The colony add-on that installs the framework, if one does."""
        return self.spec.addon

    @property
    def components(self) -> tuple[ComponentDefinition, ...]:
        """The components, in definition order."""
        return tuple(self.spec.components)

    def component(self, name: str) -> ComponentDefinition:
        """The component called `name` (KeyError when there is none)."""
        for component in self.spec.components:
            if component.name == name:
                return component
        raise KeyError(f"{self.name} has no component {name!r}")

    @property
    def gang_groups(self) -> tuple[GangGroup, ...]:
        """The gangs; when the definition names none, one gang `all` of every component."""
        if self.spec.gang_groups:
            return tuple(self.spec.gang_groups)
        return (GangGroup(name=DEFAULT_GANG, members=[c.name for c in self.spec.components]),)

    @cached_property
    def fingerprint(self) -> str:
        """A digest of the name and spec: equal for equal definitions, whatever object holds them."""
        return spec_fingerprint(self.name, self.spec.to_wire())

    def describes(self, group: str, kind: str) -> bool:
        """Whether this definition is for objects of `group` and `kind`."""
        return self.group == group and self.kind == kind

    def to_manifest(self) -> dict[str, Any]:
        """The definition as a WorkloadDefinition manifest (what a user would apply)."""
        return {
            "apiVersion": WORKLOAD_DEFINITION.api_version,
            "kind": WORKLOAD_DEFINITION.kind,
            "metadata": {"name": self.name},
            "spec": self.spec.to_wire(),
        }


def spec_fingerprint(name: str, spec: Any) -> str:
    """A digest of a definition's name and (wire) spec, for caches of checks and evaluations."""
    text = json.dumps([name, jqexpr.plain(spec)], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def describe_object(obj: Mapping[str, Any]) -> str:
    """`<Kind> <namespace>/<name>` (or `<Kind> <name>`) of a custom resource, for messages."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") or metadata.get("generateName") or "<unnamed>"
    namespace = metadata.get("namespace")
    return f"{obj.get('kind') or 'object'} {namespace + '/' if namespace else ''}{name}"


def evaluate(
    definition: WorkloadDefinition,
    field: str,
    expression: str,
    scope: Any,
    obj: Mapping[str, Any],
) -> list[Any]:
    """Every output of one of the definition's expressions on `scope` (the object or an instance).

    Raises `EvaluationError` naming the definition, the field and the object when jq fails.
    """
    try:
        return jqexpr.evaluate_all(expression, scope)
    except jqexpr.JqError as error:
        raise EvaluationError(
            f"WorkloadDefinition {definition.name!r}: {field} {expression!r} failed on "
            f"{describe_object(obj)}: {error}"
        ) from None


def _loc(loc: tuple[int | str, ...]) -> str:
    text = "spec"
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


ExpressionField = tuple[str, str, bool]
"""(field, jq expression, whether it must be a path expression) of one expression of a definition."""


def expression_fields(spec: WorkloadDefinitionSpec) -> list[ExpressionField]:
    """Every jq expression of a definition, with the field it is in and whether it must be a path."""
    expressions: list[ExpressionField] = []
    for i, component in enumerate(spec.components):
        where = f"spec.components[{i}]"
        expressions += [
            (f"{where}.podTemplatePath", component.pod_template_path, True),
            (f"{where}.replicasPath", component.replicas_path, False),
        ]
        if component.instances_path is not None:
            expressions.append((f"{where}.instancesPath", component.instances_path, True))
        if component.instance_name_path is not None:
            expressions.append((f"{where}.instanceNamePath", component.instance_name_path, False))
    status = spec.status
    if status.conditions_path is not None:
        expressions.append(("spec.status.conditionsPath", status.conditions_path, False))
    if status.phase_path is not None:
        expressions.append(("spec.status.phasePath", status.phase_path, False))
    for phase, matchers in _mappings(status.mappings):
        for j, matcher in enumerate(matchers):
            if matcher.expression is not None:
                expressions.append(
                    (f"spec.status.mappings.{phase}[{j}].expression", matcher.expression, False)
                )
    return expressions


def expression_problem(field: str, expression: str, needs_path: bool) -> str | None:
    """Why one expression is unusable (does not compile, is not a path expression where one is
    needed), or None. Evaluates `path(expression)` on null: run it where time is bounded."""
    try:
        jqexpr.check(expression)
    except jqexpr.JqError as error:
        return f"{field}: jq expression {expression!r} does not compile: {error}"
    if needs_path and not jqexpr.is_path_expression(expression):
        return (
            f"{field}: {expression!r} is not a jq path expression (the operator must be able to "
            "write node selectors where it points)"
        )
    return None


def _expression_problems(spec: WorkloadDefinitionSpec) -> list[str]:
    """Every jq expression that does not compile, or is not a path expression where one is needed."""
    found = (expression_problem(*entry) for entry in expression_fields(spec))
    return [problem for problem in found if problem is not None]


def _mappings(mappings: StatusMappings) -> tuple[tuple[str, list[StatusMatcher]], ...]:
    return (
        ("failed", mappings.failed),
        ("succeeded", mappings.succeeded),
        ("running", mappings.running),
        ("pending", mappings.pending),
    )


def _structure_problems(spec: WorkloadDefinitionSpec) -> list[str]:
    """Duplicate names, unknown gang members and matchers that cannot work."""
    problems = []
    names = [c.name for c in spec.components]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"spec.components: component name {name!r} is used {names.count(name)} times")
    for i, component in enumerate(spec.components):
        if component.instance_name_path is not None and component.instances_path is None:
            problems.append(f"spec.components[{i}].instanceNamePath: needs instancesPath")
    gang_names = [g.name for g in spec.gang_groups]
    for name in sorted({n for n in gang_names if gang_names.count(n) > 1}):
        problems.append(f"spec.gangGroups: gang name {name!r} is used {gang_names.count(name)} times")
    for i, gang in enumerate(spec.gang_groups):
        for member in gang.members:
            if member not in names:
                problems.append(
                    f"spec.gangGroups[{i}].members: {member!r} is not a component (components: "
                    f"{', '.join(names)})"
                )
    for phase, matchers in _mappings(spec.status.mappings):
        for j, matcher in enumerate(matchers):
            where = f"spec.status.mappings.{phase}[{j}]"
            given = [
                key
                for key, value in (
                    ("phase", matcher.phase),
                    ("conditions", matcher.conditions),
                    ("expression", matcher.expression),
                )
                if value is not None
            ]
            if len(given) != 1:
                problems.append(f"{where}: set exactly one of phase, conditions or expression (got {given})")
            if matcher.phase is not None and spec.status.phase_path is None:
                problems.append(f"{where}.phase: needs spec.status.phasePath")
            if matcher.conditions is not None and spec.status.conditions_path is None:
                problems.append(f"{where}.conditions: needs spec.status.conditionsPath")
    return problems


def definition_from_manifest(
    obj: Mapping[str, Any], *, builtin: bool = False, check_expressions: bool = True
) -> WorkloadDefinition:
    """Validate a WorkloadDefinition manifest (as applied or as read from the API server).

    Raises `DefinitionError` listing every problem, each with the field it concerns. Without
    `check_expressions`, jq is not called at all: the operator checks a user's expressions in its
    bounded worker instead (`colony.workloads.sandbox`).
    """
    if not isinstance(obj, Mapping):
        raise DefinitionError(f"a WorkloadDefinition must be a mapping, not {type(obj).__name__}")
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    label = f"WorkloadDefinition {name!r}" if name else "WorkloadDefinition"
    problems = []
    if not name or not isinstance(name, str):
        problems.append("metadata.name: required")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version is not None and api_version != WORKLOAD_DEFINITION.api_version:
        problems.append(f"apiVersion: expected {WORKLOAD_DEFINITION.api_version}, got {api_version!r}")
    if kind is not None and kind != WORKLOAD_DEFINITION.kind:
        problems.append(f"kind: expected {WORKLOAD_DEFINITION.kind}, got {kind!r}")
    try:
        spec = WorkloadDefinitionSpec.model_validate(obj.get("spec"))
    except ValidationError as error:
        problems += [f"{_loc(e['loc'])}: {e['msg']}" for e in error.errors()]
        raise DefinitionError(f"{label} is invalid: " + "; ".join(problems)) from None
    problems += _structure_problems(spec)
    if check_expressions:
        problems += _expression_problems(spec)
    if problems:
        raise DefinitionError(f"{label} is invalid: " + "; ".join(problems))
    assert isinstance(name, str)
    return WorkloadDefinition(name=name, spec=spec, builtin=builtin)


@lru_cache(maxsize=1)
def _builtin_definitions() -> tuple[WorkloadDefinition, ...]:
    directory = resources.files("colony").joinpath(*BUILTIN_RESOURCE)
    definitions = []
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        try:
            manifest = yaml.safe_load(entry.read_text(encoding="utf-8"))
            definitions.append(definition_from_manifest(manifest, builtin=True))
        except (yaml.YAMLError, DefinitionError) as error:
            raise DefinitionError(f"shipped definition {entry.name}: {error}") from None
    return tuple(definitions)


def load_builtin_definitions() -> list[WorkloadDefinition]:
    """The definitions shipped with the operator (parsed and validated once per process)."""
    return list(_builtin_definitions())


class DefinitionRegistry:
    """Built-in plus user-supplied definitions, looked up by the kind they describe.

    A user definition for the same group and kind as a built-in overrides it; among several user
    definitions of one kind, the first by name wins (deterministic, whatever the order they came in).
    """

    def __init__(self, builtins: Iterable[WorkloadDefinition] | None = None) -> None:
        self._builtins: tuple[WorkloadDefinition, ...] = (
            tuple(builtins) if builtins is not None else _builtin_definitions()
        )
        self._users: dict[str, WorkloadDefinition] = {}

    def add(self, manifest: Mapping[str, Any] | WorkloadDefinition) -> WorkloadDefinition:
        """Add or replace a user definition (by name); raises `DefinitionError` if it is invalid."""
        definition = (
            manifest if isinstance(manifest, WorkloadDefinition) else definition_from_manifest(manifest)
        )
        self._users[definition.name] = definition
        return definition

    def remove(self, name: str) -> WorkloadDefinition | None:
        """Forget the user definition `name` (the built-in it overrode applies again); None if absent."""
        return self._users.pop(name, None)

    def for_kind(self, group: str, kind: str) -> WorkloadDefinition | None:
        """The definition in force for objects of `group` and `kind`, or None."""
        for name in sorted(self._users):
            if self._users[name].describes(group, kind):
                return self._users[name]
        for definition in self._builtins:
            if definition.describes(group, kind):
                return definition
        return None

    def for_object(self, obj: Mapping[str, Any]) -> WorkloadDefinition | None:
        """The definition in force for a custom resource, from its apiVersion and kind."""
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        return self.for_kind(group, str(obj.get("kind") or ""))

    def get(self, name: str) -> WorkloadDefinition | None:
        """A definition by name, user-supplied first."""
        return self._users.get(name) or next((d for d in self._builtins if d.name == name), None)

    def definitions(self) -> list[WorkloadDefinition]:
        """The definitions in force, one per kind, ordered by group and kind."""
        kinds = {(d.group, d.kind) for d in (*self._builtins, *self._users.values())}
        found = (self.for_kind(group, kind) for group, kind in sorted(kinds))
        return [d for d in found if d is not None]

    def __iter__(self) -> Iterator[WorkloadDefinition]:
        return iter(self.definitions())

    def __len__(self) -> int:
        return len(self.definitions())
