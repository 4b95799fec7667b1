"""Pure rules for fault isolation of GPRs (issue 17.3 and 17.4): no I/O here.

- The idle timer of a Ready request pauses while its colony is unreachable (unreachable is not idle).
- A running request on an unreachable colony is never chosen as a preemption victim: its GPUs
  cannot be taken back while nobody can take its labels off.
- Reservation labels are reconciled with the requests that still exist whenever a colony is read:
  labels of requests that hold nothing (or are gone, per the colony's ledger) come off, missing
  labels of Ready requests are written again.
- A phase change decided on one version of a request is retried on a fresh read after a 409 only
  while the fresh version is still in the state the decision was made for.
- An ephemeral colony whose owning request is gone (and that no other request uses) is swept.
- A deleted colony takes the reservation labels it accounts for (its ledger, and the labels of the
  requests placed through it) off the nodes of its clusters that outlive it (existing clusters):
  left there, nothing would ever read them again, and a later colony on the same cluster would count
  them as foreign, its GPUs occupied forever.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from colony.labels import FOR_GPR_LABEL, RESERVATION_PREFIX
from colony.scheduling.queueing.model import RunningRequest
from colony.scheduling.queueing.objects import PENDING_PHASES, RUNNING_PHASES, request_key, reservation_label
from colony.scheduling.teardown import is_ephemeral

STALE_RESERVATION_PREFIX = "stale." + RESERVATION_PREFIX
"""Colony annotation `stale.gpr.colony.exalsius.ai/<hash>: "<cluster>/<node>,..."`: the ledger of
reservation labels that could not be taken off (the colony was unreachable) and whose request may
be gone by the time it returns; the labels come off and the entry is cleared once it is read."""

"""Label of an ephemeral colony: the uid of the GPR it was provisioned for (older colonies: its name)."""
"""Annotation of an ephemeral colony: the name of the GPR it was provisioned for."""

COLONY_REACHABLE = "ColonyReachable"
"""Condition type on a request holding GPUs: whether its colony's clusters could be read."""


class IdleAction(Enum):
    """What the idle timer of a Ready GPR does in one pass."""

    KEEP = "keep"
    START = "start"
    CLEAR = "clear"
    PAUSE = "pause"
    RELEASE = "release"


def idle_action(
    reachable: bool, in_use: bool, idle_since: float | None, now: float, limit: float
) -> IdleAction:
    """The idle-timer step for one GPR.

    An unreachable colony is not idle: the timer pauses (it is cleared, so it restarts from zero
    once usage can be observed again) and the GPR keeps its GPUs.
    """
    if not reachable:
        return IdleAction.PAUSE
    if in_use:
        return IdleAction.CLEAR if idle_since is not None else IdleAction.KEEP
    if idle_since is None:
        return IdleAction.START
    return IdleAction.RELEASE if now - idle_since >= limit else IdleAction.KEEP


def unreachable_clusters(
    gpr: Mapping[str, Any], read: Container[tuple[str, str]], colonies: Container[str]
) -> list[str]:
    """The clusters of a running request's allocation that were not read this pass (`read`: the
    (colony, cluster) pairs read); empty when all were, or when its colony no longer exists
    (`colonies`: every colony key): a colony that is gone will never answer, so it is not waited for.
    """
    status = gpr.get("status") or {}
    colony = str(status.get("colony") or "")
    if status.get("phase") not in RUNNING_PHASES or colony not in colonies:
        return []
    clusters = sorted({str(n.get("cluster")) for n in status.get("nodes") or []})
    return [c for c in clusters if (colony, c) not in read]


def pinned_while_unreachable(running: RunningRequest, unreachable: bool) -> RunningRequest:
    """The core's view of a running request: not evictable while its colony is unreachable."""
    if not unreachable or not running.request.evictable:
        return running
    return replace(running, request=replace(running.request, evictable=False))


def reachability_condition(
    conditions: Sequence[Mapping[str, Any]], colony: str, missing: Sequence[str]
) -> tuple[str, str, str] | None:
    """(status, reason, message) of the ColonyReachable condition to write, or None when the
    current one already says so (a reachable colony is recorded only to end an unreachable spell)."""
    current = next((c for c in conditions if c.get("type") == COLONY_REACHABLE), None)
    if missing:
        wanted = (
            "False",
            "ColonyUnreachable",
            f"colony {colony} cluster(s) {', '.join(missing)} could not be read: the GPUs stay "
            "reserved and the idle timer is paused until it answers again",
        )
    elif current is not None and current.get("status") == "False":
        wanted = ("True", "ColonyReachable", f"colony {colony} answers again; reservation labels reconciled")
    else:
        return None
    if current is not None and (current.get("status"), current.get("reason")) == wanted[:2]:
        return None
    return wanted


@dataclass(frozen=True)
class LabelFix:
    """Reservation label changes for one node: a value writes the label, None takes it off."""

    cluster: str
    node: str
    labels: dict[str, str | None]


def stale_ledger(colony_meta: Mapping[str, Any]) -> dict[str, list[str]]:
    """The colony's ledger of labels left on its nodes: reservation label -> `cluster/node`s."""
    ledger: dict[str, list[str]] = {}
    for key, value in (colony_meta.get("annotations") or {}).items():
        if key.startswith(STALE_RESERVATION_PREFIX):
            label = RESERVATION_PREFIX + key[len(STALE_RESERVATION_PREFIX) :]
            ledger[label] = [n for n in str(value).split(",") if n]
    return ledger


def ledger_entry(label: str, nodes: Sequence[str]) -> tuple[str, str]:
    """The colony annotation (key, value) recording that `label` may be left on `nodes`."""
    return STALE_RESERVATION_PREFIX + label[len(RESERVATION_PREFIX) :], ",".join(sorted(set(nodes)))


def has_ledger(colony_meta: Mapping[str, Any]) -> bool:
    """Whether the colony's ledger records labels still to be taken off (the scheduler then reads
    the colony, wanted by a request or not, so that the labels come off soon)."""
    return any(key.startswith(STALE_RESERVATION_PREFIX) for key in colony_meta.get("annotations") or {})


def labels_of_colony(
    colony: str, colony_meta: Mapping[str, Any], gprs: Iterable[Mapping[str, Any]]
) -> frozenset[str]:
    """The reservation labels a colony (key `namespace/name`) being deleted takes off its clusters'
    nodes: those in its ledger, and those of every request placed through it (any phase: a request
    holding GPUs there loses them with the colony)."""
    labels = set(stale_ledger(colony_meta))
    for gpr in gprs:
        if (gpr.get("status") or {}).get("colony") == colony:
            labels.add(reservation_label(request_key(gpr)))
    return frozenset(labels)


def label_removals(
    nodes: Iterable[Mapping[str, Any]], labels: Container[str]
) -> list[tuple[str, dict[str, None]]]:
    """(node name, {label: None}) for every listed node carrying some of `labels`, in name order."""
    removals = []
    for node in nodes:
        meta = node.get("metadata") or {}
        found = {key: None for key in meta.get("labels") or {} if key in labels}
        if found:
            removals.append((str(meta.get("name")), found))
    return sorted(removals)


@dataclass(frozen=True)
class Reservations:
    """Which reservation labels the known requests account for (computed once per pass)."""

    holding: frozenset[str]
    """Labels of requests holding GPUs (Admitted or Ready, not being deleted)."""
    done: frozenset[str]
    """Labels of known requests holding none (any other phase, or being deleted)."""
    ready: Mapping[str, tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...]]
    """colony -> (label, ((cluster, node, gpus), ...)) of its Ready requests."""


def reservations(gprs: Iterable[Mapping[str, Any]]) -> Reservations:
    """The Reservations of `gprs` (every request the operator watches). A request never admitted
    (no `reservationLabel` in its status) has no label anywhere and is skipped: thousands may wait."""
    holding: set[str] = set()
    done: set[str] = set()
    ready: dict[str, list[tuple[str, tuple[tuple[str, str, str], ...]]]] = {}
    for gpr in gprs:
        status = gpr.get("status") or {}
        if not status.get("reservationLabel"):
            continue
        label = reservation_label(request_key(gpr))
        if status.get("phase") not in RUNNING_PHASES or gpr["metadata"].get("deletionTimestamp"):
            done.add(label)
            continue
        holding.add(label)
        if status.get("phase") == "Ready" and status.get("colony"):
            nodes = tuple(
                (str(n["cluster"]), str(n["node"]), str(n["gpus"])) for n in status.get("nodes") or []
            )
            ready.setdefault(str(status["colony"]), []).append((label, nodes))
    return Reservations(
        frozenset(holding), frozenset(done - holding), {k: tuple(v) for k, v in ready.items()}
    )


def label_fixes(
    colony: str,
    nodes: Mapping[str, Sequence[Mapping[str, Any]]],
    known: Reservations,
    ledger: Mapping[str, Sequence[str]],
) -> list[LabelFix]:
    """The label changes that make the nodes of one colony's clusters (`nodes`: listing by cluster
    name, only the clusters read this pass) agree with the requests that exist.

    - A label of a request that holds no GPUs (not Admitted/Ready, or being deleted) comes off; so
      does a label in the colony's ledger whose request holds none (it may be gone: its label key,
      a hash, names no request any more).
    - A Ready request on this colony whose label is missing or wrong on a node of its allocation
      gets it written again (Admitted ones are still being labelled by their admission).
    Labels of requests this operator does not know (another operator's) are left alone.
    """
    unwanted = known.done | (set(ledger) - known.holding)
    fixes: dict[tuple[str, str], dict[str, str | None]] = {}
    listed: dict[tuple[str, str], Mapping[str, Any]] = {}
    for cluster, items in nodes.items():
        for node in items:
            name = str(node["metadata"]["name"])
            labels = node["metadata"].get("labels") or {}
            listed[(cluster, name)] = labels
            for key in labels:
                if key in unwanted:
                    fixes.setdefault((cluster, name), {})[key] = None
    for label, allocation in known.ready.get(colony, ()):
        for where, gpus in ((a[:2], a[2]) for a in allocation):
            if where in listed and listed[where].get(label) != gpus:
                fixes.setdefault(where, {})[label] = gpus
    return [LabelFix(cluster, node, labels) for (cluster, node), labels in sorted(fixes.items())]


def settled_ledger(ledger: Mapping[str, Sequence[str]], read_clusters: Iterable[str]) -> list[str]:
    """Ledger entries (labels) whose every cluster was read this pass: once their labels are off,
    the entries are cleared."""
    read = set(read_clusters)
    return sorted(label for label, nodes in ledger.items() if all(n.split("/", 1)[0] in read for n in nodes))


def transition_applies(
    read: Mapping[str, Any],
    fresh: Mapping[str, Any] | None,
    from_phases: Sequence[str | None],
    *,
    same_spec: bool = False,
    same_allocation: bool = False,
) -> bool:
    """Whether a phase change decided on `read` may be written onto `fresh` (the request re-read
    after the write met a newer version): it is the same object, not being deleted, still in one
    of `from_phases`, and, as asked, with the spec (generation) and allocation (colony, nodes) the
    decision was made on. Otherwise the decision is dropped and the next pass decides afresh."""
    if fresh is None:
        return False
    meta, fresh_meta = read["metadata"], fresh["metadata"]
    if fresh_meta.get("uid") != meta.get("uid") or fresh_meta.get("deletionTimestamp"):
        return False
    status, fresh_status = read.get("status") or {}, fresh.get("status") or {}
    if fresh_status.get("phase") not in from_phases:
        return False
    if same_spec and fresh_meta.get("generation") != meta.get("generation"):
        return False
    return not same_allocation or _allocation(fresh_status) == _allocation(status)


def _allocation(status: Mapping[str, Any]) -> tuple[Any, ...]:
    nodes = sorted(
        (str(n.get("cluster")), str(n.get("node")), int(n.get("gpus") or 0))
        for n in status.get("nodes") or []
    )
    return status.get("colony"), tuple(nodes)


def orphaned_colonies(
    colonies: Mapping[str, Mapping[str, Any]], gprs: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Keys of ephemeral colonies provisioned for a request (label FOR_GPR_LABEL) whose request is
    gone (no request of its namespace with that uid, or for older colonies that name), that are not
    already being deleted and that no other request holds GPUs on or waits for."""
    owners = {(g["metadata"]["namespace"], str(g["metadata"].get("uid"))) for g in gprs}
    owners |= {(g["metadata"]["namespace"], str(g["metadata"]["name"])) for g in gprs}
    used: set[str] = set()
    for gpr in gprs:
        status = gpr.get("status") or {}
        if gpr["metadata"].get("deletionTimestamp"):
            continue
        if status.get("phase") in RUNNING_PHASES and status.get("colony"):
            used.add(str(status["colony"]))
        if status.get("phase") in (*RUNNING_PHASES, *PENDING_PHASES) and status.get("provisionedColony"):
            used.add(f"{gpr['metadata']['namespace']}/{status['provisionedColony']}")
    orphans = []
    for key, colony in sorted(colonies.items()):
        meta = colony["metadata"]
        owner = (meta.get("labels") or {}).get(FOR_GPR_LABEL)
        if not owner or not is_ephemeral(meta) or meta.get("deletionTimestamp") or key in used:
            continue
        if (meta["namespace"], str(owner)) not in owners:
            orphans.append(key)
    return orphans
