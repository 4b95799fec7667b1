"""The placement loop: framework custom resources of the management cluster placed on colonies.

One pass (every COLONY_PLACEMENT_INTERVAL_SECONDS):
1. reads the WorkloadDefinitions (built-in plus user-supplied; their status says whether they were
   accepted) and the PlacementPolicies, then every object of each defined kind the management cluster
   serves, in the watched namespaces;
2. for the objects a policy or the label `placement.exalsius.ai/enabled: "true"` selects (or that
   carry our finalizer): their demand (colony.workloads), the colonies that may take them (Ready,
   visible to their namespace, chosen by the policy, serving the kind's CRD), their GPU requests
   (colony.placement.requests), and the copies of placed ones in the colony clusters;
3. decides per object (colony.placement.decide) and applies the actions; the GPU requests go through
   the GPR queue and scheduler like any other.

A loop rather than kopf handlers: the kinds are only known at run time (a WorkloadDefinition may be
applied at any time), and one pass reads each colony cluster once for all objects.

Every jq expression (built-in or user definitions) runs in the bounded worker of
`colony.workloads.sandbox`, batched per pass and cached per object resourceVersion: a pathological
expression marks its definition invalid (or one object unplaceable) and never blocks the loop.

One object never stops the others: an error while selecting, reading, deciding or applying one
object is recorded on it (the message annotation and a PlacementFailed warning Event) and backs it
off (colony.scheduling.backoff, keyed by uid and generation; at most BACKOFF_CAP_S), and the pass
goes on. The colonies are read (clients, discovery, copies) concurrently under one deadline per
pass (COLONY_READ_DEADLINE_S): a colony that misses it is unreachable for that pass.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import kopf

from colony import events
from colony.api import COLONY, GPR
from colony.api.placementpolicy import PLACEMENT_POLICY
from colony.api.workloaddefinition import WORKLOAD_DEFINITION
from colony.controllers.colony_shares import read_visibility
from colony.controllers.context import OperatorContext, context_of
from colony.controllers.loops import gather_bounded, run_passes
from colony.controllers.placement_clusters import (
    READ_TIMEOUT_S,
    ColonyAccess,
    CopyConflict,
    Discovery,
    create_copy,
    list_copies,
    open_colony,
    serving,
)
from colony.gpu import GPU_RESOURCE
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.resources import Conflict, Kube, KubeApiError, NotFound
from colony.labels import FINALIZER
from colony.placement import decide as actions
from colony.placement import duplicate
from colony.placement.candidates import Candidates, ColonyView, candidates, colony_view
from colony.placement.names import (
    CLEANUP_FAILURES_ANNOTATION,
    CLUSTER_ANNOTATION,
    COLONY_ANNOTATION,
    COPIES_ANNOTATION,
    MESSAGE_ANNOTATION,
    REQUEST_ANNOTATION,
)
from colony.placement.requests import MANAGED_LABEL, RequestPlan, Shape, Workload, members_of, plan_requests
from colony.placement.selection import (
    DEFAULT_SPEC,
    Policy,
    Selection,
    needs_namespace_labels,
    parse_policies,
    select,
)
from colony.scheduling.backoff import Backoff
from colony.scheduling.cleanup import CLEANUP_FAILED, failed_try_message
from colony.scheduling.visibility import NOBODY_ELSE, Visibility, visible
from colony.timefmt import format_time
from colony.workloads.definition import (
    DefinitionError,
    DefinitionRegistry,
    EvaluationError,
    WorkloadDefinition,
)
from colony.workloads.demand import DemandError
from colony.workloads.pinning import pin_at_paths, strip_for_copy
from colony.workloads.sandbox import ExpressionSandbox
from colony.workloads.sandbox_worker import ObjectReading, PhaseReading

CONCURRENCY = 8
"""Objects whose actions are applied at once."""
COLONY_READ_DEADLINE_S = READ_TIMEOUT_S
"""The deadline of a pass's colony reads (all colonies concurrently, not per colony)."""
COLONY_READ_CONCURRENCY = 16
"""Colonies read at once."""
BACKOFF_CAP_S = 30.0
"""The longest an object whose placement failed is left alone (passes run every second)."""
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
"""Added to the pod templates of a copy pinned to reserved GPU nodes (GPU nodes are often tainted)."""

log = logging.getLogger(__name__)


@kopf.on.startup()
async def start_placement(memo: kopf.Memo, **_: Any) -> None:
    """Run the placement loop for the operator's lifetime."""
    ctx = context_of(memo)
    ctx.start("placement", _loop(ctx))


@kopf.on.cleanup()
async def stop_placement(memo: kopf.Memo, **_: Any) -> None:
    await context_of(memo).stop("placement")


async def _loop(ctx: OperatorContext) -> None:
    discovery = Discovery()
    backoff = Backoff(cap_s=BACKOFF_CAP_S)
    await run_passes(
        "placement",
        lambda: run_pass(ctx, discovery, backoff),
        ctx.settings.placement_interval_s,
        metric_kind=PLACEMENT_POLICY.kind,
    )


async def _registry(ctx: OperatorContext) -> DefinitionRegistry:
    """Built-in definitions plus the valid WorkloadDefinitions; each one's status records whether
    it was accepted (written when that changes)."""
    registry = DefinitionRegistry()
    for obj in await ctx.kube.list(WORKLOAD_DEFINITION.api_version, WORKLOAD_DEFINITION.kind):
        error = None
        try:
            registry.add(await ctx.expressions.definition(obj))
        except DefinitionError as problem:
            error = str(problem)
            log.warning("WorkloadDefinition %s rejected: %s", obj["metadata"]["name"], error)
        await _definition_status(ctx, obj, error)
    return registry


async def _definition_status(ctx: OperatorContext, obj: Mapping[str, Any], error: str | None) -> None:
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    accepted = "False" if error else "True"
    current: Mapping[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Accepted"), {}
    )
    if status.get("observedGeneration") == generation and current.get("status") == accepted:
        return
    condition = {
        "type": "Accepted",
        "status": accepted,
        "reason": "Invalid" if error else "Valid",
        "message": error or "placement reads objects of this kind with it",
        "lastTransitionTime": format_time(datetime.now(UTC)),
        "observedGeneration": generation,
    }
    with contextlib.suppress(NotFound):
        await ctx.kube.patch_status(
            WORKLOAD_DEFINITION.api_version,
            WORKLOAD_DEFINITION.kind,
            obj["metadata"]["name"],
            None,
            {"observedGeneration": generation, "message": error, "conditions": [condition]},
        )


async def _served(ctx: OperatorContext, discovery: Discovery, definition: WorkloadDefinition) -> bool:
    try:
        return await discovery.serves(ctx.kube, definition.api_version, definition.plural)
    except (KubeApiError, OSError, TimeoutError) as error:
        log.warning("discovery of %s failed (%s): %s", definition.api_version, type(error).__name__, error)
        return False


@dataclass
class Pass:
    """What one pass read."""

    raw_policies: list[dict[str, Any]]
    policies: list[Policy]
    objects: list[tuple[WorkloadDefinition, dict[str, Any]]]
    colonies: dict[str, dict[str, Any]] = field(default_factory=dict)
    access: dict[str, ColonyAccess] = field(default_factory=dict)
    views: dict[str, ColonyView] = field(default_factory=dict)
    visibility: Visibility = NOBODY_ELSE
    """Which colonies each namespace may use (its own; others through ColonyShares)."""
    gprs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    copies: dict[tuple[str, str, str], dict[str, dict[str, Any]] | None] = field(default_factory=dict)
    """(colony, cluster, apiVersion/kind) -> copies by original uid; None: unreadable."""
    status_subresource: dict[str, bool] = field(default_factory=dict)
    """apiVersion/plural -> whether the management cluster has a status subresource for it."""
    backoff: Backoff = field(default_factory=Backoff)
    """Objects whose placement failed lately, by uid (kept by the loop from pass to pass)."""


async def _objects(
    ctx: OperatorContext, discovery: Discovery, registry: DefinitionRegistry
) -> list[tuple[WorkloadDefinition, dict[str, Any]]]:
    found: list[tuple[WorkloadDefinition, dict[str, Any]]] = []
    for definition in registry.definitions():
        kinds = ctx.settings.placement_kinds
        if kinds is not None and f"{definition.plural}.{definition.group}" not in kinds:
            continue
        if not await _served(ctx, discovery, definition):
            continue
        for obj in await ctx.kube.list(definition.api_version, definition.kind):
            namespace = obj["metadata"].get("namespace")
            if namespace and ctx.watches(namespace):  # cluster-scoped kinds are not placed
                found.append((definition, obj))
    return found


async def _read_colonies(
    ctx: OperatorContext,
    discovery: Discovery,
    world: Pass,
    namespaces: set[str],
    placed_on: set[str],
    definitions: Iterable[WorkloadDefinition],
    copy_kinds: set[tuple[str, str, str, str]],
) -> None:
    """The colonies objects of `namespaces` may use (and those holding copies, Ready or not, so
    that copies can be deleted): per colony, clients of its clusters, whether it serves each
    framework resource in play, and its copies of each kind in `copy_kinds` (colony, cluster,
    apiVersion, kind). The colonies are read concurrently under one deadline for the whole pass
    (COLONY_READ_DEADLINE_S); a colony that misses it, or whose read fails, is unreachable for
    this pass (its clusters unreachable, its copies unreadable) while the others are placed."""
    definitions = list(definitions)
    to_read: list[tuple[str, dict[str, Any], bool]] = []
    for colony in await ctx.kube.list(COLONY.api_version, COLONY.kind):
        meta = colony["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        world.colonies[key] = colony
        if colony_view(colony, {}).ready and any(visible(key, n, world.visibility) for n in namespaces):
            to_read.append((key, colony, True))
        elif key in placed_on:
            to_read.append((key, colony, False))
    results = await gather_bounded(
        (
            _read_colony(ctx, discovery, colony, only_ready, definitions, _kinds_on(key, copy_kinds))
            for key, colony, only_ready in to_read
        ),
        COLONY_READ_CONCURRENCY,
        timeout_s=COLONY_READ_DEADLINE_S,
    )
    read = {key: result for (key, _, _), result in zip(to_read, results, strict=True)}
    for key, colony in world.colonies.items():
        result = read.get(key)
        served: dict[str, str | None] = {}
        if isinstance(result, BaseException):
            why = f"unreachable this pass: {type(result).__name__}: {result}"
            log.warning("colony %s %s", key, why)
            clusters = [str(c.get("name")) for c in (colony.get("status") or {}).get("clusters") or []]
            world.access[key] = ColonyAccess(key, errors={c: why for c in clusters or ["*"]})
            served = {f"{d.plural}.{d.group}": why for d in definitions}
        elif result is not None:
            world.access[key], served, copies = result
            world.copies.update(copies)
        world.views[key] = colony_view(colony, served)
    for holder, cluster, api_version, kind in copy_kinds:
        world.copies.setdefault((holder, cluster, f"{api_version}/{kind}"), None)


def _kinds_on(key: str, copy_kinds: set[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """The (cluster, apiVersion, kind) whose copies are read in colony `key`."""
    return sorted(
        (cluster, api_version, kind) for colony, cluster, api_version, kind in copy_kinds if colony == key
    )


async def _read_colony(
    ctx: OperatorContext,
    discovery: Discovery,
    colony: Mapping[str, Any],
    only_ready: bool,
    definitions: Sequence[WorkloadDefinition],
    kinds: Sequence[tuple[str, str, str]],
) -> tuple[ColonyAccess, dict[str, str | None], dict[tuple[str, str, str], dict[str, dict[str, Any]] | None]]:
    """One colony of `_read_colonies`: its clients, what it serves, its copies (None: unreadable)."""
    access = await open_colony(ctx, colony, only_ready=only_ready)
    served = {
        f"{d.plural}.{d.group}": await serving(discovery, access, d.api_version, d.plural)
        for d in definitions
    }
    copies: dict[tuple[str, str, str], dict[str, dict[str, Any]] | None] = {}
    for cluster, api_version, kind in kinds:
        kube = access.clients.get(cluster)
        found = None
        if kube is not None:
            try:
                found = await list_copies(kube, api_version, kind)
            except (KubeApiError, OSError, TimeoutError) as error:
                log.warning(
                    "copies of %s in colony %s cluster %s unreadable: %s", kind, access.key, cluster, error
                )
        copies[(access.key, cluster, f"{api_version}/{kind}")] = found
    return access, served, copies


async def _namespace_labels(ctx: OperatorContext, policies: Sequence[Policy]) -> dict[str, dict[str, str]]:
    if not needs_namespace_labels(policies):
        return {}
    return {
        n["metadata"]["name"]: n["metadata"].get("labels") or {}
        for n in await ctx.kube.list("v1", "Namespace")
    }


def _shape(reading: ObjectReading) -> tuple[Shape | None, str | None]:
    """The object's GPU gang (None: it asks for no GPUs), or why it cannot be told."""
    demand = reading.demand
    if demand is None:
        return None, reading.demand_error or "no demand"
    try:
        if demand.gpu_pods == 0:
            return None, None
        shape = demand.request_shape()
    except DemandError as error:
        return None, str(error)
    return Shape(shape.nodes, shape.gpus_per_node, tuple(shape.gpu_types)), None


def _copy_kinds(
    chosen: Sequence[tuple[WorkloadDefinition, Mapping[str, Any], Selection | None]],
) -> set[tuple[str, str, str, str]]:
    """(colony, cluster, apiVersion, kind) holding copies of the chosen objects: one LIST each."""
    wanted: set[tuple[str, str, str, str]] = set()
    for d, obj, _ in chosen:
        annotations = obj["metadata"].get("annotations") or {}
        if annotations.get(COLONY_ANNOTATION):
            wanted.add(
                (
                    str(annotations[COLONY_ANNOTATION]),
                    annotations.get(CLUSTER_ANNOTATION, ""),
                    d.api_version,
                    d.kind,
                )
            )
        wanted |= {
            (colony, record.cluster, d.api_version, d.kind)
            for colony, record in duplicate.records_in(annotations).items()
        }
    return wanted


# -- the pass ----------------------------------------------------------------------------------------


async def run_pass(ctx: OperatorContext, discovery: Discovery, backoff: Backoff | None = None) -> None:
    """One placement pass; `backoff`: the objects whose placement failed lately (the loop keeps it
    from pass to pass)."""
    started = time.monotonic()
    backoff = backoff if backoff is not None else Backoff(cap_s=BACKOFF_CAP_S)
    registry = await _registry(ctx)
    raw_policies = await ctx.kube.list(PLACEMENT_POLICY.api_version, PLACEMENT_POLICY.kind)
    policies, invalid = parse_policies(raw_policies)
    for name, why in invalid.items():
        log.warning("PlacementPolicy %s ignored: %s", name, why)
    world = Pass(raw_policies, policies, await _objects(ctx, discovery, registry), backoff=backoff)
    namespace_labels = await _namespace_labels(ctx, policies)
    chosen: list[tuple[WorkloadDefinition, dict[str, Any], Selection | None]] = []
    for definition, obj in world.objects:
        try:
            selection = select(
                obj,
                definition.group,
                definition.kind,
                namespace_labels.get(obj["metadata"]["namespace"]),
                policies,
            )
        except Exception as error:  # one object's data never stops the pass
            await _failed(ctx, world, definition, obj, "selection", error)
            continue
        if selection is not None or FINALIZER in (obj["metadata"].get("finalizers") or []):
            chosen.append((definition, obj, selection))
    if chosen:
        await _place(ctx, discovery, world, chosen)
    await _policy_status(ctx, world, chosen)
    ctx.expressions.sweep()
    backoff.end_pass(started)


async def _place(
    ctx: OperatorContext,
    discovery: Discovery,
    world: Pass,
    chosen: Sequence[tuple[WorkloadDefinition, dict[str, Any], Selection | None]],
) -> None:
    placed_on = {
        str(colony)
        for _, obj, _ in chosen
        if (colony := (obj["metadata"].get("annotations") or {}).get(COLONY_ANNOTATION))
    }
    placed_on |= {colony for _, obj, _ in chosen for colony in _duplicated_on(obj)}
    world.visibility = await read_visibility(ctx.kube)
    definitions = {d.name: d for d, _, _ in chosen}
    namespaces = {obj["metadata"]["namespace"] for _, obj, _ in chosen}
    await _read_colonies(
        ctx, discovery, world, namespaces, placed_on, definitions.values(), _copy_kinds(chosen)
    )
    for gpr in await ctx.kube.list(GPR.api_version, GPR.kind, label_selector=f"{MANAGED_LABEL}=true"):
        world.gprs[(gpr["metadata"]["namespace"], gpr["metadata"]["name"])] = gpr
    selected: list[tuple[WorkloadDefinition, Workload]] = []
    dropped: list[tuple[WorkloadDefinition, Workload]] = []
    sandbox: ExpressionSandbox = ctx.expressions
    wanted = [(d, obj) for d, obj, selection in chosen if selection is not None]
    read = dict(zip((_uid(obj) for _, obj in wanted), await sandbox.read_objects(wanted), strict=True))
    for definition, obj, selection in chosen:
        try:
            namespace = obj["metadata"]["namespace"]
            resource = f"{definition.plural}.{definition.group}"
            if selection is None:
                w = Workload(obj, Selection(None, DEFAULT_SPEC), Candidates((), False, ()), None)
                dropped.append((definition, w))
                continue
            shape, error = _shape(read[_uid(obj)])
            found = candidates(
                namespace, selection, resource, definition.addon, world.views, world.visibility
            )
            selected.append((definition, Workload(obj, selection, found, shape, error)))
        except Exception as problem:  # one object's data never stops the pass
            await _failed(ctx, world, definition, obj, "reading its demand", problem)
    phases = await _read_phases(sandbox, world, selected)
    plans = plan_requests([w for _, w in selected if not duplicate.is_duplicate(w.selection)], world.gprs)
    spread = duplicate.requests_by_owner(world.gprs)
    work: list[Awaitable[None]] = []
    for definition, w in selected:
        if _backing_off(world, w.obj):
            continue
        requests = spread.get((w.namespace, str(w.obj["metadata"]["uid"])), {})
        pin, phase_of = _pin(definition, read[_uid(w.obj)]), _phase_of(phases)
        if duplicate.is_duplicate(w.selection) or COPIES_ANNOTATION in w.annotations:
            todo = _guarded(world, w, partial(_duplicated, world, definition, w, requests, pin, phase_of))
            work.append(_execute(ctx, discovery, world, definition, w, todo))
            continue
        uses_request = w.shape is not None or bool(w.annotations.get(REQUEST_ANNOTATION))
        plan = plans.get((w.namespace, w.member)) if uses_request else None
        seen = _observed(world, definition, w)
        # per-colony requests left from a spread that was undone: deleted
        todo = [actions.DeleteRequest(str(g["metadata"]["name"])) for _, g in sorted(requests.items())]
        todo += _guarded(world, w, partial(actions.decide, w, plan, seen, pin, phase_of))
        work.append(_execute(ctx, discovery, world, definition, w, todo))
    for definition, w in dropped:
        if _backing_off(world, w.obj):
            continue
        requests = spread.get((w.namespace, str(w.obj["metadata"]["uid"])), {})
        if COPIES_ANNOTATION in w.annotations or requests:
            todo = _guarded(
                world,
                w,
                partial(duplicate.unplace, w, requests, _observed_copies(world, definition, w)),
            )
        else:
            todo = _guarded(
                world,
                w,
                partial(actions.unplace, w, _recorded_plan(world, w), _observed(world, definition, w)),
            )
        work.append(_execute(ctx, discovery, world, definition, w, todo))
    await _concurrently(work)


def _generation(obj: Mapping[str, Any]) -> tuple[Any, bool]:
    """What ends an object's backoff when it changes: its generation, or its deletion."""
    meta = obj.get("metadata") or {}
    return meta.get("generation") or meta.get("resourceVersion"), bool(meta.get("deletionTimestamp"))


def _backing_off(world: Pass, obj: Mapping[str, Any]) -> bool:
    """Whether the object's placement failed lately and its backoff is not over (left alone)."""
    return world.backoff.waiting(_uid(obj), _generation(obj), time.monotonic())


def _back_off(world: Pass, obj: Mapping[str, Any], why: str) -> float:
    """Record a failure of the object's placement; how long it is left alone."""
    return world.backoff.failed(_uid(obj), _generation(obj), time.monotonic(), why)


async def _failed(
    ctx: OperatorContext,
    world: Pass,
    definition: WorkloadDefinition,
    obj: Mapping[str, Any],
    step: str,
    error: BaseException,
) -> None:
    """An object's handling raised before its actions were decided: back it off, and say why on it
    (message annotation, PlacementFailed warning Event); writing that may fail too (only logged)."""
    meta = obj.get("metadata") or {}
    message = f"placement failed: {step}: {type(error).__name__}: {error}"
    wait = _back_off(world, obj, message)
    log.warning(
        "%s %s/%s: %s (retried in %.0fs)",
        definition.kind,
        meta.get("namespace"),
        meta.get("name"),
        message,
        wait,
        exc_info=not isinstance(error, KubeApiError | OSError | TimeoutError),
    )
    if (meta.get("annotations") or {}).get(MESSAGE_ANNOTATION) == message:
        return
    w = Workload(obj, Selection(None, DEFAULT_SPEC), Candidates((), False, ()), None)
    try:
        await _annotate(ctx, definition, w, {MESSAGE_ANNOTATION: message})
        await _event(ctx, definition, w, "PlacementFailed", message, warning=True)
    except Exception as problem:  # the failure is in the backoff and the log
        log.warning(
            "recording the failure on %s/%s failed: %s", meta.get("namespace"), meta.get("name"), problem
        )


def _duplicated_on(obj: Mapping[str, Any]) -> set[str]:
    """The colonies holding copies of a duplicated object (spread Duplicate)."""
    return set(duplicate.records_in(obj["metadata"].get("annotations") or {}))


def _duplicated(
    world: Pass,
    definition: WorkloadDefinition,
    w: Workload,
    requests: Mapping[str, Mapping[str, Any]],
    pin: actions.Pin,
    phase_of: actions.PhaseOf,
) -> list[actions.Action]:
    """The actions of an object whose policy spreads it (Duplicate), or that was spread and is
    placed on one colony now: the way it was placed is undone first, the next pass places it anew."""
    if not duplicate.is_duplicate(w.selection):
        return duplicate.unplace(w, requests, _observed_copies(world, definition, w))
    if w.placed or w.annotations.get(REQUEST_ANNOTATION):
        return actions.unplace(w, _recorded_plan(world, w), _observed(world, definition, w))
    seen = _observed_copies(world, definition, w)
    return duplicate.decide(w, requests, seen, pin, phase_of)


def _observed_copies(world: Pass, definition: WorkloadDefinition, w: Workload) -> dict[str, actions.Observed]:
    """Per colony holding a copy of a duplicated object: what was read of it."""
    found: dict[str, actions.Observed] = {}
    for colony, record in duplicate.records(w).items():
        view = world.views.get(colony)
        ready = view is not None and view.ready
        copies = world.copies.get((colony, record.cluster, f"{definition.api_version}/{definition.kind}"))
        if copies is None:
            found[colony] = actions.Observed(colony_ready=ready)
        else:
            found[colony] = actions.Observed(ready, True, copies.get(str(w.obj["metadata"]["uid"])))
    return found


def _uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"].get("uid"))


def _version(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid")), str(meta.get("resourceVersion"))


async def _read_phases(
    sandbox: ExpressionSandbox, world: Pass, selected: Sequence[tuple[WorkloadDefinition, Workload]]
) -> dict[tuple[str, str], PhaseReading]:
    """The standard phase of every copy the selected objects have, one batch for the pass."""
    pairs: dict[tuple[str, str], tuple[WorkloadDefinition, Mapping[str, Any]]] = {}
    for definition, w in selected:
        seen = [_observed(world, definition, w), *_observed_copies(world, definition, w).values()]
        for observed in seen:
            if observed.copy is not None:
                pairs[_version(observed.copy)] = (definition, observed.copy)
    found = await sandbox.read_phases(list(pairs.values()))
    return dict(zip(pairs, found, strict=True))


def _guarded(world: Pass, w: Workload, decide: Callable[[], list[actions.Action]]) -> list[actions.Action]:
    """The decision, or, when it raised, the failure recorded on the object (the next pass decides
    again): an expression of the definition failed on the object or its copy (EvaluationError from
    pin or phase_of), or anything else went wrong with this object's data (that also backs it off)."""
    try:
        return decide()
    except Exception as error:  # one object's data never stops the pass
        if isinstance(error, EvaluationError):
            message = f"placement failed: {error}"
            log.warning("%s/%s: %s", w.namespace, w.obj["metadata"]["name"], message)
        else:
            message = f"placement failed: deciding: {type(error).__name__}: {error}"
            wait = _back_off(world, w.obj, message)
            log.warning(
                "%s/%s: %s (retried in %.0fs)",
                w.namespace,
                w.obj["metadata"]["name"],
                message,
                wait,
                exc_info=True,
            )
        if w.annotations.get(MESSAGE_ANNOTATION) == message:
            return []
        return [
            actions.Annotate({MESSAGE_ANNOTATION: message}),
            actions.Event("PlacementFailed", message, True),
        ]


def _pin(definition: WorkloadDefinition, reading: ObjectReading) -> actions.Pin:
    def pin(obj: Mapping[str, Any], selector: dict[str, str]) -> dict[str, Any]:
        stripped = strip_for_copy(obj)
        if not selector:
            return stripped
        if reading.template_paths is None:
            raise EvaluationError(reading.paths_error or f"{definition.name}: no pod template paths")
        return pin_at_paths(stripped, reading.template_paths, selector, [GPU_TOLERATION])

    return pin


def _phase_of(phases: Mapping[tuple[str, str], PhaseReading]) -> actions.PhaseOf:
    def phase(copy: Mapping[str, Any]) -> str:
        reading = phases.get(_version(copy))
        if reading is None or reading.phase is None:
            raise EvaluationError((reading.error if reading else None) or "the copy's phase was not read")
        return reading.phase

    return phase


def _recorded_plan(world: Pass, w: Workload) -> RequestPlan | None:
    """The request an object that is no longer selected used (its annotation); deleted with it
    unless other objects of its group use it too."""
    name = w.annotations.get(REQUEST_ANNOTATION)
    if not name:
        return None
    existing = world.gprs.get((w.namespace, name))
    others = set(members_of(existing)) - {w.member}
    return RequestPlan(name, existing, release=not others)


def _observed(world: Pass, definition: WorkloadDefinition, w: Workload) -> actions.Observed:
    colony = w.annotations.get(COLONY_ANNOTATION)
    if not colony:
        return actions.Observed()
    view = world.views.get(colony)
    ready = view is not None and view.ready
    cluster = w.annotations.get(CLUSTER_ANNOTATION, "")
    copies = world.copies.get((colony, cluster, f"{definition.api_version}/{definition.kind}"))
    if copies is None:
        return actions.Observed(colony_ready=ready)
    return actions.Observed(ready, True, copies.get(str(w.obj["metadata"]["uid"])))


# -- applying ----------------------------------------------------------------------------------------


async def _execute(
    ctx: OperatorContext,
    discovery: Discovery,
    world: Pass,
    definition: WorkloadDefinition,
    w: Workload,
    todo: Sequence[actions.Action],
) -> None:
    """Apply one object's actions in order; a failure stops them, is recorded on the object and
    backs it off (a Conflict or NotFound of a write onto a changed object only waits for the next
    pass, which decides again). While the object is being deleted, a copy that cannot be deleted
    (any error) is a failed try of its cleanup, counted on the object and retried no sooner than
    DELETE_RETRY_DELAY_S later; decide gives the copies up after DELETE_RETRIES
    (colony.scheduling.cleanup)."""
    meta = w.obj["metadata"]
    cleaning = w.deleting and any(isinstance(a, actions.DeleteCopy | actions.CleanupFailed) for a in todo)
    if cleaning and not actions.cleanup_failures(w.annotations).retry_due(datetime.now(UTC)):
        return
    for action in todo:
        try:
            await _apply_one(ctx, discovery, world, definition, w, action)
        except Exception as error:  # one object's failure never stops the others
            if cleaning and isinstance(action, actions.DeleteCopy):
                where = f"colony {action.colony} cluster {action.cluster}"
                await _count_cleanup_failure(ctx, definition, w, where, error)
                return
            if isinstance(error, Conflict | NotFound) and not isinstance(action, actions.ApplyCopy):
                log.debug("placement of %s/%s: %s (next pass)", meta["namespace"], meta["name"], error)
                return
            message = f"placement failed: {type(action).__name__}: {error}"
            wait = _back_off(world, w.obj, message)
            expected = isinstance(
                error, KubeApiError | ClusterAccessError | CopyConflict | OSError | TimeoutError
            )
            log.warning(
                "%s %s/%s: %s (retried in %.0fs)",
                definition.kind,
                meta["namespace"],
                meta["name"],
                message,
                wait,
                exc_info=not expected,
            )
            if (meta.get("annotations") or {}).get(MESSAGE_ANNOTATION) != message:
                with contextlib.suppress(Exception):  # the failure is in the backoff and the log
                    await _annotate(ctx, definition, w, {MESSAGE_ANNOTATION: message})
                    await _event(ctx, definition, w, "PlacementFailed", message, warning=True)
            return


async def _apply_one(
    ctx: OperatorContext,
    discovery: Discovery,
    world: Pass,
    definition: WorkloadDefinition,
    w: Workload,
    action: actions.Action,
) -> None:
    meta = w.obj["metadata"]
    kube: Kube = ctx.kube
    if isinstance(action, actions.AddFinalizer | actions.RemoveFinalizer):
        finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        if isinstance(action, actions.AddFinalizer):
            finalizers.append(FINALIZER)
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        await kube.patch(definition.api_version, definition.kind, meta["name"], meta["namespace"], body)
    elif isinstance(action, actions.ApplyRequest):
        await kube.apply(action.manifest)
    elif isinstance(action, actions.DeleteRequest):
        await kube.delete(GPR.api_version, GPR.kind, action.name, meta["namespace"])
    elif isinstance(action, actions.ApplyCopy):
        target = _cluster(world, action.colony, action.cluster)
        update = action.update
        if update is None:
            update = bool(meta.get("annotations", {}).get(COLONY_ANNOTATION))
        await create_copy(target, action.manifest, update)
    elif isinstance(action, actions.DeleteCopy):
        target = _cluster(world, action.colony, action.cluster)
        await target.delete(definition.api_version, definition.kind, meta["name"], meta["namespace"])
    elif isinstance(action, actions.CleanupFailed):
        await _count_cleanup_failure(ctx, definition, w, "its colony clusters", action.reason)
    elif isinstance(action, actions.MirrorStatus):
        await _mirror(ctx, discovery, definition, w, action.status)
    elif isinstance(action, actions.Annotate):
        await _annotate(ctx, definition, w, action.annotations)
    elif isinstance(action, actions.Event):
        await _event(ctx, definition, w, action.reason, action.message, action.warning)


async def _count_cleanup_failure(
    ctx: OperatorContext, definition: WorkloadDefinition, w: Workload, where: str, error: object
) -> None:
    """One more failed cleanup try, recorded on the object (CLEANUP_FAILURES_ANNOTATION) with a
    warning Event; the next pass tries again or, after DELETE_RETRIES, gives the copies up."""
    meta = w.obj["metadata"]
    failures = actions.cleanup_failures(w.annotations)
    message = failed_try_message(where, failures.tries + 1, error)
    log.warning("%s %s/%s: %s", definition.kind, meta["namespace"], meta["name"], message)
    record = failures.record(datetime.now(UTC), str(error))
    with contextlib.suppress(KubeApiError, OSError, TimeoutError):
        await _annotate(ctx, definition, w, {CLEANUP_FAILURES_ANNOTATION: record})
        await _event(ctx, definition, w, CLEANUP_FAILED, message, warning=True)


def _cluster(world: Pass, colony: str, cluster: str) -> Kube:
    access = world.access.get(colony)
    kube = access.clients.get(cluster) if access is not None else None
    if kube is None:
        why = (access.errors.get(cluster) if access is not None else None) or "not Ready"
        raise ClusterAccessError(f"colony {colony} cluster {cluster}: {why}")
    return kube


async def _mirror(
    ctx: OperatorContext,
    discovery: Discovery,
    definition: WorkloadDefinition,
    w: Workload,
    status: dict[str, Any],
) -> None:
    """The copy's status onto the original (replaced whole: the management cluster runs no
    controller of the kind, so the copy's is the only status there is)."""
    meta = w.obj["metadata"]
    subresource = (
        "status" if await discovery.has_status(ctx.kube, definition.api_version, definition.plural) else None
    )
    await ctx.kube.patch(
        definition.api_version,
        definition.kind,
        meta["name"],
        meta["namespace"],
        [{"op": "add", "path": "/status", "value": status}],
        subresource=subresource,
        json_patch=True,
    )


async def _annotate(
    ctx: OperatorContext, definition: WorkloadDefinition, w: Workload, annotations: Mapping[str, str | None]
) -> None:
    meta = w.obj["metadata"]
    body = {"metadata": {"annotations": dict(annotations)}}
    await ctx.kube.patch(definition.api_version, definition.kind, meta["name"], meta["namespace"], body)


async def _event(
    ctx: OperatorContext,
    definition: WorkloadDefinition,
    w: Workload,
    reason: str,
    message: str,
    warning: bool = False,
) -> None:
    await events.post_now(
        ctx.kube,
        definition.api_version,
        definition.kind,
        w.obj["metadata"],
        reason,
        message,
        warning=warning,
    )


async def _policy_status(
    ctx: OperatorContext,
    world: Pass,
    chosen: Sequence[tuple[WorkloadDefinition, dict[str, Any], Selection | None]],
) -> None:
    """Each policy's counts of selected and placed objects, written when they change."""
    counts = {p.name: [0, 0] for p in world.policies}
    for _, obj, selection in chosen:
        if selection is not None and selection.policy in counts:
            counts[selection.policy][0] += 1
            annotations = obj["metadata"].get("annotations") or {}
            if annotations.get(COLONY_ANNOTATION) or annotations.get(COPIES_ANNOTATION):
                counts[selection.policy][1] += 1
    raw = {p["metadata"]["name"]: p for p in world.raw_policies}
    for name, (selected, placed) in counts.items():
        current = (raw.get(name) or {}).get("status") or {}
        generation = (raw.get(name) or {}).get("metadata", {}).get("generation")
        wanted = {"selected": selected, "placed": placed, "observedGeneration": generation}
        if {k: current.get(k) for k in wanted} != wanted:
            with contextlib.suppress(NotFound):
                await ctx.kube.patch_status(
                    PLACEMENT_POLICY.api_version, PLACEMENT_POLICY.kind, name, None, wanted
                )


async def _concurrently(calls: Iterable[Awaitable[None]], limit: int = CONCURRENCY) -> None:
    for result in await gather_bounded(calls, limit):
        if isinstance(result, Exception):
            log.warning("placement of an object failed: %s", result)
